"""The bodies of `actors spawn`, `kill` and `cancel`, without click.

They run on the hand-parsed path (actors.cli._fast) and under click (actors.cli.runs),
so both paths start and stop runs the same way and print the same thing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.runs.spawn import SpawnOptions
    from runtime.store.layout import StateRoot
    from runtime.store.records import RunRecord


def parse_values(pairs: Sequence[str]) -> dict[str, Any]:
    """`-v KEY=VALUE` pairs as a mapping; a name given twice is refused (an array takes
    a JSON array or a comma list in one value, so a repeat is a mistake, not a choice)."""
    from runtime.core.errors import BadInput

    values: dict[str, Any] = {}
    for pair in pairs:
        name, value = split_pair(pair)
        if name in values:
            raise BadInput(
                f"-v {name} is given twice",
                hint=f'give it once; an array takes -v {name}=a,b or -v {name}=\'["a","b"]\'',
            )
        values[name] = value
    return values


def split_pair(pair: str) -> tuple[str, str]:
    """One `-v KEY=VALUE` (spawn's template values, run's tool parameters)."""
    from runtime.core.errors import BadInput

    name, sep, value = pair.partition("=")
    if not sep or not name:
        raise BadInput(f"-v {pair!r} is not KEY=VALUE", hint="e.g. -v source=~/Music")
    return name, value


def start_run(options: SpawnOptions, *, waiter: bool = False) -> RunRecord:
    """Start the detached run `actors spawn` names; returns its record. `waiter`: the
    caller will block on the result (`spawn --wait`), so no follow-up is owed to it."""
    from runtime.runs.spawn import SpawnRequest, spawn as spawn_run

    record = spawn_run(
        SpawnRequest(
            recipe=options.one_recipe(),
            template=options.template,
            run_id=options.as_,
            values=parse_values(options.values),
            session=options.session,
            secret_names=list(options.secrets),
            waiter=waiter,
            group=options.group,
            after=list(options.after),
        )
    )
    if os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET"):  # run by a Claude Code session
        from adapters.claude_code.hooks import record_spawner_socket
        from runtime.store.layout import StateRoot

        record_spawner_socket(StateRoot.from_env(), str(record.get("owner_id") or ""))
    return record


def spawn(*, as_json: bool = False, **options: Any) -> None:
    """The body of `actors spawn` without `--wait`: start the run, print its address.
    Its options are SpawnOptions's fields as keywords, as the hand parser
    (actors.cli._fast, SPAWN_ARGS) names them; the click command passes its record's."""
    from runtime.runs.spawn import SpawnOptions

    spawn_report(start_run(SpawnOptions(**options)), as_json)


def spawn_report(record: RunRecord, as_json: bool) -> None:
    """A run was started (spawn, restart): its address, and for a run that waits
    (`--group`, `--after`) whether it is queued and for what."""
    from actors.cli._format import print_started

    extra: dict[str, Any] = {"run_instance_id": record["run_instance_id"]}
    if record.get("group") or record.get("after"):
        from runtime.runner.gate import expected_wait
        from runtime.store.layout import StateRoot

        waiting = expected_wait(StateRoot.from_env(), dict(record))
        extra.update({"status": "queued" if waiting else "starting", "waiting_for": waiting})
    print_started(record, as_json, **extra)


def kill(run: str, *, force: bool, session: str | None, as_json: bool) -> None:
    """The body of `actors kill`: SIGKILL the run's whole process tree now."""
    from runtime.runs.control import kill as kill_run
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot, parse_run_ref

    root = StateRoot.from_env()
    run_id = parse_run_ref(run)
    summary = kill_run(root, run_id, current_principal(root, session), force=force)
    _reap_placed(root, run_id)
    _report(summary, as_json)


def cancel(run: str, *, grace: float, force: bool, session: str | None, as_json: bool) -> None:
    """The body of `actors cancel`: SIGTERM, up to `grace` seconds, then SIGKILL."""
    from runtime.runs.control import cancel as cancel_run
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot, parse_run_ref

    root = StateRoot.from_env()
    principal = current_principal(root, session)
    run_id = parse_run_ref(run)
    summary = cancel_run(root, run_id, principal, force=force, grace=grace)
    _reap_placed(root, run_id)
    _report(summary, as_json)


def _reap_placed(root: StateRoot, run_id: str) -> None:
    """The runs this run's commands placed on hosts are killed there before the verb
    returns (its end starts the same reap, detached, for every other way a run ends)."""
    if not root.run(run_id).placed_on_hosts.exists():
        return
    from runtime.hosts.step import stop_placed

    for problem in stop_placed(root, run_id):
        sys.stderr.write(f"actors: could not stop {problem}\n")


def _report(summary: Mapping[str, Any], as_json: bool) -> None:
    from actors.cli._format import emit_json, summary_parts, write_line

    if as_json:
        emit_json(summary)
    else:
        write_line(summary_parts(summary))

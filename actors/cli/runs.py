"""Run lifecycle commands: spawn, ls, status, wait, cancel, kill.

Output reading (tail, result) is in actors.cli.output, retention (archive, prune) in
actors.cli.retention.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from actors.cli._format import ProgressLine, emit_json, summary_parts, write_line
from actors.cli._options import SECONDS, force_option, json_option, session_option
from actors.cli._views import list_view, status_view
from actors.cli.completion import live_run_ids, recipe_names, run_ids, value_names
from runtime.store.layout import StateRoot, parse_run_ref
from runtime.views.counts import steps_line
from runtime.views.status import TERMINAL, read_progress

if TYPE_CHECKING:
    from runtime.runs.spawn import SpawnOptions

WAIT_TIMEOUT_EXIT = 75
"""`wait --timeout` expired with the run still active (EX_TEMPFAIL: try again later)."""


def _root() -> StateRoot:
    return StateRoot.from_env()


def exit_code(summary: Mapping[str, Any]) -> int:
    code = summary.get("code")
    if summary["status"] == "done":
        return 0
    if isinstance(code, int) and 0 < code < 256:
        return code
    return 1


def progress_printer(run_id: str, line: ProgressLine, prefix: str = "") -> Any:
    """An on_tick for wait_for: the run's state and counters on the progress line."""
    started = time.monotonic()

    def show(summary: dict[str, Any]) -> None:
        if not line.live:
            return
        progress = read_progress(_root().run(run_id))
        line.show(
            f"  {prefix}{run_id}: {summary['status']} {time.monotonic() - started:4.0f}s  "
            f"{steps_line(progress)}"
        )

    return show


def _wait_and_report(
    ids: list[str], timeout: float | None, as_json: bool, *, hold: bool = False
) -> None:
    """Wait for every run in turn (one deadline for all), print each one's status line
    as it ends, and exit with the worst outcome: 75 when the timeout left any active,
    else the highest exit code (0 only when all are done)."""
    from runtime.views.status import find_run
    from runtime.views.waiting import wait_for

    root = _root()
    for run_id in ids:
        find_run(root, run_id)  # an unknown run is refused before any waiting
    deadline = None if timeout is None else time.monotonic() + timeout
    line = ProgressLine()
    summaries: list[dict[str, Any]] = []
    for index, run_id in enumerate(ids):
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        prefix = f"[{index + 1}/{len(ids)}] " if len(ids) > 1 else ""
        summary = wait_for(
            root, run_id, timeout=left, on_tick=progress_printer(run_id, line, prefix), hold=hold
        )
        line.clear()
        summaries.append(dict(summary))
        if summary["status"] not in TERMINAL:
            click.echo(f"run:{run_id} still {summary['status']} after {timeout:g}s", err=True)
        elif as_json:
            if hold and (offer := _keep_offer(run_id)):
                summaries[-1]["keep"] = offer
        else:
            write_line(summary_parts(summary))
            if hold and summary["status"] == "failed":  # no follow-up will say why
                _explain(run_id)
            elif hold and not sys.stderr.isatty() and (offer := _keep_offer(run_id)):
                click.echo(f"actors: {offer}", err=True)
    if as_json:
        emit_json(summaries[0] if len(summaries) == 1 else summaries)
    if any(s["status"] not in TERMINAL for s in summaries):
        sys.exit(WAIT_TIMEOUT_EXIT)
    sys.exit(max(exit_code(s) for s in summaries))


def _keep_offer(run_id: str) -> str | None:
    """The follow-up's offer to keep a successful ad-hoc run, which a waited run never
    gets. It is written for an agent (it asks it to consult the operator), so callers pass
    it on only where an agent reads: --json, or a stderr that is not a terminal (an agent's
    tool call captures it); a person at a terminal never sees it."""
    from runtime.core.errors import ActorsError
    from runtime.delivery.followups import keep_offer
    from runtime.views.status import find_run, read_result

    try:
        paths, record = find_run(_root(), run_id)
        result = read_result(paths)
    except ActorsError:
        return None
    return keep_offer(record, result) if result else None


def _explain(run_id: str) -> None:
    from actors.cli._format import failure_lines
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.core.errors import ActorsError
    from runtime.views.status import find_run, read_result

    try:
        paths, record = find_run(_root(), run_id)
        result: Mapping[str, Any] = read_result(paths) or {}
        failure = result.get("failure")
    except ActorsError:
        return
    for line in failure_lines(redact_deep(failure, run_secrets(record))):
        click.echo(line, err=True)


@click.command("spawn")
@click.argument("recipe", required=False, shell_complete=recipe_names)
@click.option("--recipe", "recipe_file", metavar="FILE", help="Recipe file to run.")
@click.option(
    "-t", "--template", metavar="STR", help="Inline command template instead of a recipe."
)
@click.option("--as", "as_", metavar="run:ID", help="Run id to use (default: <recipe>-<random>).")
@click.option(
    "-v",
    "--value",
    "values",
    multiple=True,
    metavar="KEY=VALUE",
    shell_complete=value_names,
    help="A template value (repeatable).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="NAME",
    help="Treat this value as secret (redacted).",
)
@click.option(
    "--group",
    metavar="NAME",
    help="Start when group NAME has a free slot (`actors group set`); queued till then.",
)
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="RUN",
    shell_complete=run_ids,
    help="Start once RUN ended done (repeatable); skipped if it ends any other way.",
)
@click.option("--wait", is_flag=True, help="Block with a progress line; exit with the run's code.")
@click.option(
    "--host",
    metavar="NAME",
    help="Run it on host NAME (`actors host add`), addressed run:NAME/ID (docs/hosts.md).",
)
@session_option
@json_option
def spawn_cmd(
    recipe: str | None,
    recipe_file: str | None,
    template: str | None,
    as_: str | None,
    values: tuple[str, ...],
    secrets: tuple[str, ...],
    group: str | None,
    after: tuple[str, ...],
    wait: bool,
    host: str | None,
    session: str | None,
    as_json: bool,
) -> None:
    """Start a detached run of RECIPE (a name or a .json path) and print its address.

    With --wait this command holds the result, so no follow-up is sent for the run
    (unless this command is interrupted before the run ends).

    \b
    Examples:
      actors spawn hello
      actors spawn recipes/fanout.json --as run:fan
      actors spawn -t 'sleep {secs=5}' -v secs=2 --wait
      actors spawn build --group agents --after run:tests
      actors spawn --host alpha -t 'make test'
    """
    from actors.cli._lifecycle import spawn, start_run
    from runtime.runs.spawn import SpawnOptions

    options = SpawnOptions(
        recipe, recipe_file, template, as_, values, secrets, group, after, session
    )
    if host is not None:
        _spawn_on_host(host, options, wait=wait, as_json=as_json)
    if not wait:
        spawn(as_json=as_json, **options._asdict())
        return
    record = start_run(options, waiter=True)
    _wait_and_report([record["run"]], None, as_json, hold=True)


def _spawn_on_host(host: str, options: SpawnOptions, *, wait: bool, as_json: bool) -> None:
    """`spawn --host`: the options exactly as click parsed them, sent to the host as one
    request on the channel's stdin (runtime.hosts.spawning), never as a command line."""
    from actors.cli._lifecycle import parse_values
    from runtime.core.errors import BadInput
    from runtime.hosts.spawning import spawn_remote

    if wait:
        raise BadInput(
            "spawn --host does not take --wait",
            hint="spawn it, then wait for its address: actors wait run:HOST/ID",
        )
    parse_values(options.values)  # KEY=VALUE, each once: refused here, before anything is placed
    sys.exit(spawn_remote(_root(), host, options, as_json=as_json))


@click.command("ls")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="Only these statuses (starting, running, done, failed, cancelled, killed, exited, damaged, active, terminal).",
)
@click.option("--mine", is_flag=True, help="Only runs owned by this session.")
@click.option("--tree", is_flag=True, help="Child runs under their parent, with branches.")
@session_option
@json_option
def ls_cmd(
    statuses: tuple[str, ...], mine: bool, tree: bool, session: str | None, as_json: bool
) -> None:
    """List runs, newest first."""
    list_view(statuses, mine=mine, tree=tree, session=session, as_json=as_json)


@click.command("status")
@click.argument("run", required=False, shell_complete=run_ids)
@click.option(
    "--line", is_flag=True, help="Compact indicator of this session's active work (for a prompt)."
)
@click.option(
    "--stdin",
    is_flag=True,
    help="--line for a harness's status line: the session is the session_id of the JSON on"
    " stdin (Claude Code's status line input).",
)
@click.option(
    "--then",
    metavar="COMMAND",
    help="--line after COMMAND's output (a status line you already had; gets the same stdin).",
)
@session_option
@json_option
def status_cmd(
    run: str | None,
    line: bool,
    stdin: bool,
    then: str | None,
    session: str | None,
    as_json: bool,
) -> None:
    """Show RUN's status (run:ID or the bare id); --line: this session's active work."""
    status_view(run, line=line, session=session, as_json=as_json, stdin=stdin, then=then)


@click.command("wait")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...", shell_complete=run_ids)
@click.option("--timeout", type=SECONDS, metavar="SECONDS", help="Give up after this long (exit 75).")
@json_option
def wait_cmd(runs: tuple[str, ...], timeout: float | None, as_json: bool) -> None:
    """Block until every RUN finishes; exit with the highest of their exit codes.

    Each run's status line is printed as it ends. --timeout is one deadline for all of
    them: a run still active then exits 75. With --json: one run's summary, or a list.
    """
    _wait_and_report([parse_run_ref(run) for run in dict.fromkeys(runs)], timeout, as_json)


@click.command("cancel")
@click.argument("run", shell_complete=live_run_ids)
@click.option(
    "--grace",
    type=SECONDS,
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How long the run may take to stop before it is killed.",
)
@force_option
@session_option
@json_option
def cancel_cmd(run: str, grace: float, force: bool, session: str | None, as_json: bool) -> None:
    """Stop RUN gracefully: SIGTERM, up to --grace seconds, then SIGKILL."""
    from actors.cli._lifecycle import cancel

    cancel(run, grace=grace, force=force, session=session, as_json=as_json)


@click.command("kill")
@click.argument("run", shell_complete=live_run_ids)
@force_option
@session_option
@json_option
def kill_cmd(run: str, force: bool, session: str | None, as_json: bool) -> None:
    """Kill RUN and every process it started, immediately (SIGKILL)."""
    from actors.cli._lifecycle import kill

    kill(run, force=force, session=session, as_json=as_json)


@click.command("restart")
@click.argument("run", shell_complete=run_ids)
@click.option("--as", "as_", metavar="run:ID", help="Run id to use (default: <run>-2, -3, ...).")
@force_option
@session_option
@json_option
def restart_cmd(run: str, as_: str | None, force: bool, session: str | None, as_json: bool) -> None:
    """Start finished RUN again: the same recipe, values, directory and group, as a new
    run (its `--after` dependencies are not carried over). Prints the new address."""
    from actors.cli._lifecycle import spawn_report
    from runtime.runs.restart import restart

    root = StateRoot.from_env()
    run_id = parse_run_ref(as_) if as_ else None
    record = restart(root, parse_run_ref(run), run_id=run_id, session=session, force=force)
    spawn_report(record, as_json)

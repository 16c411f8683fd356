"""Retention commands: archive and prune finished runs."""

from __future__ import annotations

import time

import click

from actors.cli._format import emit_json
from actors.cli._options import force_option, json_option, session_option
from actors.cli.completion import run_ids
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot, parse_run_ref
from runtime.views.status import TERMINAL


def _owned(root: StateRoot, run_id: str, session: str | None, force: bool, action: str) -> None:
    from runtime.runs.ownership import check_control, current_principal
    from runtime.views.status import find_run

    _, record = find_run(root, run_id)
    check_control(record, current_principal(root, session), force=force, action=action, root=root)


@click.command("archive")
@click.argument("runs", nargs=-1, required=True, shell_complete=run_ids)
@force_option
@session_option
def archive_cmd(runs: tuple[str, ...], force: bool, session: str | None) -> None:
    """Move finished RUNS to $ACTORS_HOME/archive/ (active runs are refused)."""
    from runtime.runs.retention import archive_run

    root = StateRoot.from_env()
    ids = [parse_run_ref(r) for r in runs]
    for run_id in ids:
        _owned(root, run_id, session, force, "archive")
        click.echo(f"run:{run_id} archived to {archive_run(root, run_id)}")


@click.command("prune")
@click.argument("runs", nargs=-1, shell_complete=run_ids)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="All finished runs that ended before this (e.g. 7d, 12h).",
)
@click.option(
    "--preserve-artifacts", is_flag=True, help="Copy existing artifacts to preserved/ first."
)
@force_option
@session_option
@json_option
def prune_cmd(
    runs: tuple[str, ...],
    older_than: str | None,
    preserve_artifacts: bool,
    force: bool,
    session: str | None,
    as_json: bool,
) -> None:
    """Delete finished runs' state: the given RUNS, or all matching --older-than."""
    from runtime.runs.retention import prune_run
    from runtime.views.index import list_runs

    root = StateRoot.from_env()
    if not runs and not older_than:
        raise BadInput("say what to prune", hint="give RUN ids, or --older-than DURATION (e.g. 7d)")
    ids = [parse_run_ref(r) for r in runs]
    if older_than:
        cutoff = time.time() - _duration_s(older_than)
        from runtime.runs.ownership import current_principal

        me = current_principal(root, session).id
        for summary in list_runs(root):
            ended = _epoch(summary.get("ended_at") or summary.get("created_at"))
            if (
                summary.get("status") in TERMINAL
                and ended is not None
                and ended < cutoff
                and (force or summary.get("owner_id") == me)
            ):
                ids.append(summary["run"])
    ids = list(dict.fromkeys(ids))
    from runtime.runs.retention import require_terminal

    for run_id in ids:  # check every run before deleting any
        _owned(root, run_id, session, force, "prune")
        require_terminal(root, run_id, "pruned")
    results = [prune_run(root, run_id, preserve_artifacts=preserve_artifacts) for run_id in ids]
    if as_json:
        emit_json(results)
    else:
        for item in results:
            click.echo(f"run:{item['run']} pruned ({item['status']})")
        if not results:
            click.echo("nothing to prune", err=True)


def _epoch(stamp: object) -> float | None:
    """A run's recorded time, None when it is not a timestamp (a run wrote it: such a run
    is left alone rather than stopping the prune of the others)."""
    from runtime.core.ids import parse_iso

    try:
        return parse_iso(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def _duration_s(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.replace(".", "", 1).isdigit():
        raise BadInput(f"invalid duration {text!r}", hint="use a number and a unit: 30m, 12h, 7d")
    return float(number) * units[unit]

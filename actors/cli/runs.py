"""Run lifecycle commands: spawn, ls, status, wait, cancel, kill.

Output reading (tail, result) is in actors.cli.output, retention (archive, prune) in
actors.cli.retention.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

import click

from actors.cli._format import emit_json, stderr_is_tty, summary_line
from actors.cli._options import force_option, json_option, session_option
from actors.cli._views import list_view, status_view
from runtime.runs.status import TERMINAL, read_progress
from runtime.store.layout import StateRoot, parse_run_ref

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


def progress_printer(run_id: str) -> Any:
    started = time.monotonic()
    interactive = stderr_is_tty()

    def show(summary: dict[str, Any]) -> None:
        if not interactive:
            return

        progress = read_progress(_root().run(run_id))
        elapsed = time.monotonic() - started
        line = (
            f"  {run_id}: {summary['status']} {elapsed:4.0f}s  "
            f"{progress.get('active', 0)} active, {progress.get('completed', 0)} done, "
            f"{progress.get('failed', 0)} failed"
        )
        click.echo(f"\r{line:<78}", err=True, nl=False)

    return show


def _wait_and_report(
    run_id: str, timeout: float | None, as_json: bool, *, hold: bool = False
) -> None:
    """Block on the run, print its summary, exit with its code. `hold`: this process is
    the run's recorded waiter, so no follow-up is owed for it (runtime.runs.waiting)."""
    from runtime.runs.waiting import wait_for

    summary = wait_for(
        _root(), run_id, timeout=timeout, on_tick=progress_printer(run_id), hold=hold
    )
    if stderr_is_tty():
        click.echo("\r" + " " * 78 + "\r", err=True, nl=False)
    if summary["status"] not in TERMINAL:
        click.echo(f"run:{run_id} still {summary['status']} after {timeout:g}s", err=True)
        sys.exit(WAIT_TIMEOUT_EXIT)
    if as_json:
        emit_json(summary)
    else:
        click.echo(summary_line(summary))
        if hold and summary["status"] == "failed":  # no follow-up will say why: say it here
            _explain(run_id)
        elif hold:
            _offer_to_keep(run_id)
    sys.exit(exit_code(summary))


def _offer_to_keep(run_id: str) -> None:
    """The follow-up's offer to keep a successful ad-hoc run, which a waited run never
    gets: one line on stderr, for the person or agent that ran it."""
    from runtime.core.errors import ActorsError
    from runtime.delivery.followups import keep_offer
    from runtime.runs.status import find_run, read_result

    try:
        paths, record = find_run(_root(), run_id)
        result = read_result(paths)
    except ActorsError:
        return
    offer = keep_offer(record, result) if result else None
    if offer:
        click.echo(f"actors: {offer}", err=True)


def _explain(run_id: str) -> None:
    from actors.cli._format import failure_lines
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.core.errors import ActorsError
    from runtime.runs.status import find_run, read_result

    try:
        paths, record = find_run(_root(), run_id)
        result: Mapping[str, Any] = read_result(paths) or {}
        failure = result.get("failure")
    except ActorsError:
        return
    for line in failure_lines(redact_deep(failure, run_secrets(record))):
        click.echo(line, err=True)


@click.command("spawn")
@click.argument("recipe", required=False)
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
    help="A template value (repeatable).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="NAME",
    help="Treat this value as secret (redacted).",
)
@click.option("--wait", is_flag=True, help="Block with a progress line; exit with the run's code.")
@session_option
@json_option
def spawn_cmd(
    recipe: str | None,
    recipe_file: str | None,
    template: str | None,
    as_: str | None,
    values: tuple[str, ...],
    secrets: tuple[str, ...],
    wait: bool,
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
    """
    from actors.cli._lifecycle import spawn, start_run

    request: dict[str, Any] = {
        "recipe_file": recipe_file,
        "template": template,
        "as_": as_,
        "values": values,
        "secrets": secrets,
        "session": session,
    }
    if not wait:
        spawn(recipe=recipe, as_json=as_json, **request)
        return
    record = start_run(recipe, waiter=True, **request)
    _wait_and_report(record["run"], None, as_json, hold=True)


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
@click.argument("run", required=False)
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
@click.argument("run")
@click.option("--timeout", type=float, metavar="SECONDS", help="Give up after this long (exit 75).")
@json_option
def wait_cmd(run: str, timeout: float | None, as_json: bool) -> None:
    """Block until RUN finishes, then exit with its code."""
    _wait_and_report(parse_run_ref(run), timeout, as_json)


@click.command("cancel")
@click.argument("run")
@click.option(
    "--grace",
    type=float,
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
@click.argument("run")
@force_option
@session_option
@json_option
def kill_cmd(run: str, force: bool, session: str | None, as_json: bool) -> None:
    """Kill RUN and every process it started, immediately (SIGKILL)."""
    from actors.cli._lifecycle import kill

    kill(run, force=force, session=session, as_json=as_json)

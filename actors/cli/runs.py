"""Run lifecycle commands: spawn, ls, status, tail, result, wait, cancel, kill, archive, prune."""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Any

import click

from actors.cli._format import emit_json, stderr_is_tty, summary_line
from actors.cli._views import list_view, status_view
from runtime.core.errors import BadInput, Conflict
from runtime.runs.status import TERMINAL, read_progress
from runtime.store.files import read_bytes, read_jsonl, read_text_tail, tail_jsonl
from runtime.store.layout import StateRoot, parse_run_ref

session_option = click.option(
    "--session",
    metavar="ID",
    help="Act as this session (default: $ACTORS_SESSION, else your user).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
force_option = click.option("--force", is_flag=True, help="Act even on another session's run.")


WAIT_TIMEOUT_EXIT = 75
"""`wait --timeout` expired with the run still active (EX_TEMPFAIL: try again later)."""


def _root() -> StateRoot:
    return StateRoot.from_env()


def _exit_code(summary: dict[str, Any]) -> int:
    code = summary.get("code")
    if summary["status"] == "done":
        return 0
    if isinstance(code, int) and 0 < code < 256:
        return code
    return 1


def _progress_printer(run_id: str) -> Any:
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


def _wait_and_report(run_id: str, timeout: float | None, as_json: bool) -> None:
    from runtime.runs.waiting import wait_for

    summary = wait_for(_root(), run_id, timeout=timeout, on_tick=_progress_printer(run_id))
    if stderr_is_tty():
        click.echo("\r" + " " * 78 + "\r", err=True, nl=False)
    if summary["status"] not in TERMINAL:
        click.echo(f"run:{run_id} still {summary['status']} after {timeout:g}s", err=True)
        sys.exit(WAIT_TIMEOUT_EXIT)
    if as_json:
        emit_json(summary)
    else:
        click.echo(summary_line(summary))
    sys.exit(_exit_code(summary))


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
    record = start_run(recipe, **request)
    _wait_and_report(record["run"], None, as_json)


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
@session_option
@json_option
def status_cmd(run: str | None, line: bool, session: str | None, as_json: bool) -> None:
    """Show RUN's status (run:ID or the bare id); --line: this session's active work."""
    status_view(run, line=line, session=session, as_json=as_json)


@click.command("tail")
@click.argument("run")
@click.option("-n", "--lines", default=20, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the run ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr.log instead of stdout.log.")
@click.option(
    "--events", "use_events", is_flag=True, help="Show the lifecycle journal (events.jsonl)."
)
def tail_cmd(run: str, lines: int, follow: bool, use_stderr: bool, use_events: bool) -> None:
    """Print the end of RUN's output."""
    from runtime.compiler.redact import redact_text, run_secrets
    from runtime.runs.status import find_run

    root = _root()
    paths, record = find_run(root, parse_run_ref(run))
    secrets = run_secrets(record)  # a command may print a secret value: never echo it
    path = paths.events if use_events else paths.stderr if use_stderr else paths.stdout
    if use_events:
        for event in tail_jsonl(path, lines):
            click.echo(redact_text(_event_line(event), secrets))
    else:
        for line in read_text_tail(path, lines):
            click.echo(redact_text(line, secrets))
    if follow:
        _follow(root, paths.run_id, path, events=use_events, secrets=secrets)


def _event_line(event: dict[str, Any]) -> str:
    skip = {"id", "ts", "event", "run_instance_id"}
    rest = " ".join(f"{k}={v}" for k, v in event.items() if k not in skip and v is not None)
    return f"{event.get('ts', '')}  {event.get('event', '?')!s:<16} {rest}"


def _follow(
    root: StateRoot,
    run_id: str,
    path: Any,
    *,
    events: bool = False,
    secrets: list[str] | None = None,
) -> None:
    from runtime.compiler.redact import redact_text
    from runtime.core.process import pidfd_open
    from runtime.runs.status import derive, find_run, runner_identity

    paths, record = find_run(root, run_id)
    runner = runner_identity(paths, record)
    pidfd = pidfd_open(int(runner["pid"])) if runner else None
    offset = os.stat(path).st_size if os.path.exists(path) else 0
    journal = read_jsonl(path, offset=offset).identity if events else None
    last_id = max([""] + [str(e.get("id", "")) for e in tail_jsonl(path, 1)]) if events else ""
    ended = False
    try:
        while True:
            if events:
                # a compaction replaces the journal: then it is read from its start, and
                # events already shown are skipped (event ids sort by time)
                chunk = read_jsonl(path, offset=offset, identity=journal)
                offset, journal = chunk.next_offset, chunk.identity
                fresh = [e for e in chunk.records if str(e.get("id", "")) > last_id]
                last_id = max([last_id, *(str(e.get("id", "")) for e in fresh)])
                text = "".join(_event_line(e) + "\n" for e in fresh)
            else:
                size = os.stat(path).st_size if os.path.exists(path) else 0
                data = (
                    read_bytes(path, offset=offset, limit=size - offset) if size > offset else b""
                )
                offset = max(offset, size)
                text = data.decode(errors="replace")
            if text:
                sys.stdout.write(redact_text(text, secrets or []))
                sys.stdout.flush()
                continue
            if ended:
                return
            if derive(paths, record)["status"] in TERMINAL:
                ended = True  # one more read drains what was written just before the end
                continue
            if pidfd is not None:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                poller.poll(100)
            else:
                time.sleep(0.1)
    except KeyboardInterrupt:
        return
    finally:
        if pidfd is not None:
            os.close(pidfd)


@click.command("result")
@click.argument("run")
@json_option
def result_cmd(run: str, as_json: bool) -> None:
    """Print a finished RUN's result (status, code, output head, artifacts)."""
    from runtime.runs.status import derive, find_run, read_result

    paths, record = find_run(_root(), parse_run_ref(run))
    summary = derive(paths, record)
    if summary["status"] not in TERMINAL:
        raise Conflict(
            f"run {paths.run_id} is still {summary['status']}",
            hint=f"wait for it: actors wait {paths.run_id}",
        )
    result = read_result(paths) or {
        "run": paths.run_id,
        "status": summary["status"],
        "code": summary.get("code"),
        "reason": summary.get("reason"),
    }
    from runtime.compiler.redact import redact_deep, run_secrets

    secrets = run_secrets(record)  # the output head may quote a secret value
    result, summary = redact_deep(result, secrets), redact_deep(summary, secrets)
    if as_json:
        emit_json(result)
        return
    click.echo(summary_line({**summary, **result}))
    click.echo(f"  code     {result.get('code')}")
    for failure in result.get("failures") or []:
        click.echo(
            f"  failed   {failure.get('label') or failure.get('node')} "
            f"({failure.get('status')}, code {failure.get('code')}, "
            f"policy {failure.get('policy')})"
        )
    for name, art in (result.get("artifacts") or {}).items():
        if not art.get("exists"):
            state = "missing"
        elif art.get("is_dir"):
            state = "directory"
        else:
            state = f"{art.get('size')} bytes"
        click.echo(f"  artifact {name}: {art.get('path')} ({state})")
    if result.get("output"):
        click.echo("  output:")
        for line in str(result["output"]).splitlines()[:40]:
            click.echo(f"    {line}")


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


def _owned(root: StateRoot, run_id: str, session: str | None, force: bool, action: str) -> None:
    from runtime.runs.ownership import check_control, current_principal
    from runtime.runs.status import find_run

    _, record = find_run(root, run_id)
    check_control(record, current_principal(root, session), force=force, action=action)


@click.command("archive")
@click.argument("runs", nargs=-1, required=True)
@force_option
@session_option
def archive_cmd(runs: tuple[str, ...], force: bool, session: str | None) -> None:
    """Move finished RUNS to $ACTORS_HOME/archive/ (active runs are refused)."""
    from runtime.runs.retention import archive_run

    root = _root()
    ids = [parse_run_ref(r) for r in runs]
    for run_id in ids:
        _owned(root, run_id, session, force, "archive")
        click.echo(f"run:{run_id} archived to {archive_run(root, run_id)}")


@click.command("prune")
@click.argument("runs", nargs=-1)
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
    from runtime.runs.index import list_runs
    from runtime.runs.retention import prune_run

    root = _root()
    if not runs and not older_than:
        raise BadInput("say what to prune", hint="give RUN ids, or --older-than DURATION (e.g. 7d)")
    ids = [parse_run_ref(r) for r in runs]
    if older_than:
        cutoff = time.time() - _duration_s(older_than)
        from runtime.core.ids import parse_iso
        from runtime.runs.ownership import current_principal

        me = current_principal(root, session).id
        for summary in list_runs(root):
            ended = summary.get("ended_at") or summary.get("created_at")
            if (
                summary.get("status") in TERMINAL
                and ended
                and parse_iso(ended) < cutoff
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


def _duration_s(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.replace(".", "", 1).isdigit():
        raise BadInput(f"invalid duration {text!r}", hint="use a number and a unit: 30m, 12h, 7d")
    return float(number) * units[unit]

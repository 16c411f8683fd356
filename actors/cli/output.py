"""Reading a run's output: tail (with -f) and result."""

from __future__ import annotations

import os
import select
import sys
from typing import Any

import click

from actors.cli._format import emit_json, failure_lines, summary_parts, write_line
from actors.cli._options import json_option
from actors.cli.completion import run_ids
from runtime.core.errors import BadInput, Conflict
from runtime.core.terminal import cell
from runtime.store.layout import StateRoot, parse_run_ref, rotated
from runtime.store.reads import read_bytes, read_jsonl, read_text_tail, tail_jsonl
from runtime.views.status import TERMINAL


@click.command("tail")
@click.argument("run", shell_complete=run_ids)
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="How many lines to show.",
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the run ends.")
@click.option("--stderr", "use_stderr", is_flag=True, help="Show stderr.log instead of stdout.log.")
@click.option(
    "--events", "use_events", is_flag=True, help="Show the lifecycle journal (events.jsonl)."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the lines (or events) as one JSON document."
)
def tail_cmd(
    run: str, lines: int, follow: bool, use_stderr: bool, use_events: bool, as_json: bool
) -> None:
    """Print the end of RUN's output."""
    from runtime.compiler.redact import redact_deep, redact_text, run_secrets
    from runtime.views.status import find_run

    if as_json and follow:
        raise BadInput("--json prints one document and -f never ends", hint="use one of them")
    root = StateRoot.from_env()
    paths, record = find_run(root, parse_run_ref(run))
    secrets = run_secrets(record)  # a command may print a secret value: never echo it
    path = paths.events if use_events else paths.stderr if use_stderr else paths.stdout
    if as_json:
        stream = "events" if use_events else "stderr" if use_stderr else "stdout"
        if use_events:
            found: list[Any] = redact_deep(tail_jsonl(path, lines), secrets)
        else:
            found = [redact_text(line, secrets) for line in read_text_tail(path, lines)]
        emit_json({"run": paths.run_id, "stream": stream, "lines": found})
        return
    # where a follow goes on from, taken before the lines above it are read: what the run
    # writes while this starts following is printed then, not skipped
    start = os.stat(path) if follow and not use_events and os.path.exists(path) else None
    if use_events:
        for event in tail_jsonl(path, lines):
            click.echo(cell(redact_text(_event_line(event), secrets)))
    else:
        upto = start.st_size if start is not None else None
        for line in read_text_tail(path, lines, upto=upto):
            click.echo(redact_text(line, secrets))
    if follow:
        from runtime.core.faults import pause_point

        pause_point("tail.before_follow")
        _follow(root, paths.run_id, path, events=use_events, secrets=secrets, start=start)


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
    start: os.stat_result | None = None,
) -> None:
    from runtime.compiler.redact import redact_text
    from runtime.core.platform import ExitWatch
    from runtime.core.process import verify
    from runtime.messaging.doorbells import Bell
    from runtime.views.status import derive, find_run, runner_identity

    paths, record = find_run(root, run_id)
    # armed before the first read: the runner rings it after it writes, and its exit
    # watch wakes us when it ends (no timer: a quiet run costs nothing to follow)
    bell = Bell.open(paths.followers)
    runner = runner_identity(paths, record)
    watch = ExitWatch.open(int(runner["pid"]), str(paths.liveness)) if runner else None
    if watch is not None and runner is not None and verify(runner)[0] != "valid":
        watch.close()
        watch = None
    if start is None and events and os.path.exists(path):
        start = os.stat(path)  # events already shown are skipped by id below anyway
    offset = start.st_size if start is not None else 0  # no log yet: all of it is new
    inode = start.st_ino if start is not None else None
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
                data, offset, inode = _log_since(path, offset, inode)
                text = data.decode(errors="replace")
            if text:
                sys.stdout.write(redact_text(text, secrets or []))
                sys.stdout.flush()
                continue
            if ended:
                return
            if watch is None or derive(paths, record)["status"] in TERMINAL:
                ended = True  # one more read drains what was written just before the end
                continue
            poller = select.poll()
            poller.register(bell.read, select.POLLIN)
            poller.register(watch.fd, select.POLLIN)
            if any(fd == watch.fd for fd, _ in poller.poll()):
                ended = True  # the runner is gone: what it wrote is read once more
            bell.drain()
    except KeyboardInterrupt:
        return
    finally:
        bell.close()
        if watch is not None:
            watch.close()


_FOLLOW_STEP = 4 * 1024 * 1024


def _log_since(path: Any, offset: int, inode: int | None) -> tuple[bytes, int, int | None]:
    """(new bytes of a run log, next offset, its inode), a bounded step at a time; after
    a rotation the rest of the previous file (`<name>.1`) comes first."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return b"", offset, inode
    if inode is not None and now.st_ino != inode:
        old = rotated(path)
        try:
            before = os.stat(old, follow_symlinks=False)
        except FileNotFoundError:
            before = None
        if before is not None and before.st_ino == inode and before.st_size > offset:
            step = min(before.st_size - offset, _FOLLOW_STEP)
            return read_bytes(old, offset=offset, limit=step), offset + step, inode
        offset = 0
    step = min(max(0, now.st_size - offset), _FOLLOW_STEP)
    data = read_bytes(path, offset=offset, limit=step) if step else b""
    return data, offset + step, now.st_ino


@click.command("result")
@click.argument("run", shell_complete=run_ids)
@json_option
def result_cmd(run: str, as_json: bool) -> None:
    """Print a finished RUN's result (status, code, output head, artifacts); for a swarm,
    running or not, its per-task table."""
    from runtime.views.status import derive, find_run, read_result
    from runtime.views.swarm_tasks import is_swarm

    root = StateRoot.from_env()
    paths, record = find_run(root, parse_run_ref(run))
    summary = derive(paths, record)
    swarm = _swarm_table(root, paths.run_id) if is_swarm(record) else None
    if summary["status"] not in TERMINAL and swarm is None:
        raise Conflict(
            f"run {paths.run_id} is still {summary['status']}",
            hint=f"wait for it: actors wait {paths.run_id}",
        )
    from runtime.compiler.redact import redact_deep, run_secrets

    secrets = run_secrets(record)  # the output head may quote a secret value
    if summary["status"] not in TERMINAL:
        assert swarm is not None
        summary = redact_deep(summary, secrets)
        if as_json:
            emit_json({**summary, **swarm})
            return
        write_line(summary_parts(summary))
        _print_tasks(swarm)
        return
    found = read_result(paths)
    result: dict[str, Any] = (
        dict(found)
        if found
        else {
            "run": paths.run_id,
            "status": summary["status"],
            "code": summary.get("code"),
            "reason": summary.get("reason"),
        }
    )
    from runtime.delivery.followups import quoted_result, result_line

    said = result_line(paths, record, found) if found else None
    if said:  # what its follow-up's summary quoted
        result["result_line"] = said
    result, summary = redact_deep(result, secrets), redact_deep(summary, secrets)
    if as_json:
        emit_json({**result, **(swarm or {})})
        return
    write_line(summary_parts({**summary, **result}))
    click.echo(f"  code     {result.get('code')}")
    if result.get("result_line"):
        click.echo(f"  result   {quoted_result(str(result['result_line']))}")
    from runtime.views.counts import counts_of, steps_line

    if counts_of(result):  # a result.json of an older version may have none
        click.echo(f"  steps    {steps_line({**counts_of(result), 'active': 0})}")
    for failure in result.get("failures") or []:
        click.echo(
            cell(
                f"  failed   {failure.get('label') or failure.get('node')} "
                f"({failure.get('status')}, code {failure.get('code')}, "
                f"policy {failure.get('policy')})"
            )
        )
    for line in failure_lines(result.get("failure")):
        click.echo(line)
    for name, art in (result.get("artifacts") or {}).items():
        if not art.get("exists"):
            state = "missing"
        elif art.get("is_dir"):
            state = "directory"
        else:
            state = f"{art.get('size')} bytes"
        click.echo(cell(f"  artifact {name}: {art.get('path')} ({state})"))
    if swarm is not None:
        _print_tasks(swarm)
        return  # the workers' output is their logs; the table says what came of it
    if result.get("output"):
        click.echo("  output:")
        for line in str(result["output"]).splitlines()[:40]:
            click.echo(f"    {line}")


def _swarm_table(root: StateRoot, run_id: str) -> dict[str, Any]:
    """A swarm's per-task table, read as `inspect room:RUN --view tasks` reads it (the
    room bounded and masked; the same rows the dashboard's room page shows)."""
    from runtime.views.inspect import MAX_LINES, inspect

    found = inspect(root, f"room:{run_id}", "tasks", lines=MAX_LINES)
    return {k: found.get(k) for k in ("tasks", "counts", "drained")}


def _print_tasks(swarm: dict[str, Any]) -> None:
    """`  tasks    2 done, 1 failed` and one padded row per task; a drained swarm's
    headline after it."""
    from actors.cli._format import padded
    from runtime.core.terminal import one_line

    counts = swarm.get("counts") or {}
    told = ", ".join(f"{n} {state}" for state, n in counts.items()) or "none claimed yet"
    click.echo(cell(f"  tasks    {told}"))
    rows = [
        [
            str(t.get("task") if t.get("task") is not None else "-"),
            str(t.get("worker")),
            str(t.get("state")),
            str(t.get("commit") or "-")[:12],
            one_line(str(t.get("item") or ""), 60)
            + (f"  ({one_line(str(t['reason']), 100)})" if t.get("reason") else ""),
        ]
        for t in swarm.get("tasks") or []
    ]
    if rows:
        for line in padded(rows, ["#", "worker", "state", "commit", "item"]):
            click.echo("    " + "".join(line).rstrip())
    drained = swarm.get("drained")
    if drained:
        click.echo(cell(f"  drained  {drained.get('summary')}"))

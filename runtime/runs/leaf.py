"""One leaf of the graph: a command in its own process group, its output captured.

The command runs without a shell; its stdout and stderr are copied, secrets masked, to
its capture files and, line by line, to the run's logs (`runtime.runs.output` bounds
both). When the command exits, anything it left in
its group is stopped too; a cancel (timeout, stop) terminates the whole group (SIGTERM,
grace, SIGKILL). Every command is journalled as `command.start` / `command.done`.
Its own module because it is the process side of the executor; `executor` only walks
the graph.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from runtime.compiler.placeholders import render_argv
from runtime.core.errors import BadInput
from runtime.runs.context import Outcome, RunContext, Status
from runtime.runs.events import preview_fields, preview_text, record_event
from runtime.runs.output import LOG_CAP_BYTES as LOG_CAP, Capture, concatenate, trim
from runtime.store.layout import CapturePaths
from runtime.store.writes import ensure_dir, patiently


class Exit:
    """How the command ended, as far as known: still `failed` with no code if it never
    started, `cancelled` with no code while it is being waited for. (Plain classes, not
    dataclasses: see runtime.runs.context.)"""

    __slots__ = ("code", "reason", "status")

    def __init__(
        self, code: int | None = None, status: Status = "failed", reason: str | None = None
    ) -> None:
        self.code, self.status, self.reason = code, status, reason


class Leaf:
    """A leaf whose command is about to run (or runs): what its end is recorded from."""

    __slots__ = (
        "argv",
        "attempt",
        "capture",
        "common",
        "ended",
        "err",
        "feeds",
        "kind",
        "node",
        "out",
        "started",
    )  # fmt: skip

    def __init__(
        self,
        node: dict[str, Any],
        argv: list[str],
        kind: str,
        capture: CapturePaths,
        out: Capture,
        err: Capture,
        common: dict[str, Any],
        attempt: int,
        started: float,
        feeds: bool,
        ended: Exit,
    ) -> None:
        self.node, self.argv, self.kind, self.capture = node, argv, kind, capture
        self.out, self.err, self.common, self.attempt = out, err, common, attempt
        self.started, self.feeds, self.ended = started, feeds, ended


def begin_leaf(
    ctx: RunContext,
    node: dict[str, Any],
    words: list[str],
    attempt: int,
    values: dict[str, Any] | None = None,
    *,
    feeds: bool = False,
) -> Leaf | Outcome:
    """Render the command, open its captures and journal `command.start`; an Outcome
    when the command cannot even be rendered (runtime.runs.command runs it)."""
    try:
        argv = _resolve_command(render_argv(words, values if values is not None else ctx.values))
    except BadInput as exc:  # e.g. an index past an array's end: this node fails, clearly
        record_event(
            ctx.paths.events, ctx.instance, "node.error", node=node["id"], reason=exc.message
        )
        return Outcome("failed", 2, None, reason=preview_text(exc.message))
    command_id = ctx.next_command_id()
    capture = ctx.paths.capture(command_id)
    # a full disk makes the command wait to start, never fails the run (patiently)
    patiently(lambda: ensure_dir(capture.dir), f"create {capture.dir}")
    kind = node.get("output") or "stdout"
    out_cap = None if feeds and kind in ("stdout", "both") else LOG_CAP
    err_cap = None if feeds and kind in ("stderr", "both") else LOG_CAP
    out = patiently(lambda: Capture(capture.stdout, out_cap), f"open {capture.stdout}")
    err = patiently(lambda: Capture(capture.stderr, err_cap), f"open {capture.stderr}")
    common = {"command_id": command_id, "node": node["id"], "label": node.get("label")}
    patiently(
        lambda: record_event(
            ctx.paths.events,
            ctx.instance,
            "command.start",
            command=ctx.display(argv),
            attempt=attempt,
            **common,
        ),
        "record command.start in events.jsonl",
    )
    ctx.active += 1
    ctx.progress()
    return Leaf(
        node, argv, kind, capture, out, err, common, attempt, time.monotonic(), feeds, Exit()
    )


def end_leaf(ctx: RunContext, leaf: Leaf) -> Outcome:
    """Close the captures, journal `command.done` and return the node's outcome."""
    leaf.out.close()
    leaf.err.close()
    done = _command_done(
        ctx, leaf.argv, leaf.ended, leaf.common, leaf.attempt, leaf.started, (leaf.out, leaf.err)
    )
    output = _node_output(leaf.kind, leaf.capture, leaf.feeds)
    return Outcome(leaf.ended.status, done["code"], output, reason=leaf.ended.reason)


def exited(ended: Exit, code: int) -> None:
    """The command ended on its own with `code` (a signal's is negative)."""
    ended.code, ended.status = code, "done" if code == 0 else "failed"
    ended.reason = None if ended.status == "done" else f"exit code {ended.code}"


def not_started(ctx: RunContext, err: Capture, ended: Exit, argv: list[str], exc: OSError) -> None:
    """The command could not be started (127: not found, 126: not executable)."""
    message = f"actors: cannot start {argv[0]!r}: {exc.strerror}\n".encode()
    err.write(message)
    ctx.log("stderr").write(message)
    ended.code = 127 if isinstance(exc, FileNotFoundError) else 126
    ended.reason = exc.strerror


def _command_done(
    ctx: RunContext,
    argv: list[str],
    ended: Exit,
    common: dict[str, Any],
    attempt: int,
    started: float,
    captures: tuple[Capture, Capture],
) -> dict[str, Any]:
    """Count the command's end, journal `command.done` and hand it to the runner."""
    ctx.active -= 1
    duration_ms = round((time.monotonic() - started) * 1000)
    if ended.status == "done":
        ctx.completed += 1
    elif ended.status == "failed":
        ctx.failed += 1
    out, err = captures
    done = {
        "command": ctx.display(argv),  # masked and bounded: what a failure report names
        "code": ended.code if ended.code is not None else 143,
        "status": ended.status,
        "attempt": attempt,
        "duration_ms": duration_ms,
        "stdout_file": str(out.path),
        "stderr_file": str(err.path),
        "stdout_bytes": out.total,  # produced; the file may keep only the first part
        "stderr_bytes": err.total,
        **preview_fields(common),
    }
    # how the command ended is known only here: a full disk is waited out (patiently),
    # and a runner that dies after this line leaves a run `reconcile` can fold from it
    patiently(
        lambda: record_event(ctx.paths.events, ctx.instance, "command.done", **done),
        "record command.done in events.jsonl",
    )
    if ended.status != "done":  # failed, or cancelled by its node's timeout
        ctx.failed_commands[common["node"]] = done  # the last failed try, for result.json
    ctx.progress()
    if ctx.on_command_done is not None:
        ctx.on_command_done(done)
    return done


def kill_group(pgid: int, sig: int) -> None:
    """Signal a leaf's group; called only while the leaf (its leader, our child) is not
    reaped, so the group id cannot have been recycled for a stranger."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _resolve_command(argv: list[str]) -> list[str]:
    if argv and argv[0].startswith("~"):
        argv = [os.path.expanduser(argv[0]), *argv[1:]]
    return argv


def _node_output(kind: str, capture: CapturePaths, feeds: bool) -> Path | None:
    """The stream that is this node's result (and the next step's stdin): `output`."""
    if kind == "stdout":
        return capture.stdout
    if kind == "stderr":
        return capture.stderr
    if kind == "none":
        return None
    both = capture.both
    concatenate(both, [capture.stdout, capture.stderr], None if feeds else LOG_CAP)
    trim(capture.stdout)  # both.log is what a later step reads: the halves need no more
    trim(capture.stderr)
    return both

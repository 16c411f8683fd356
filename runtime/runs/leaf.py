"""One leaf of the graph: a command in its own process group, its output captured.

The command runs without a shell; its stdout and stderr are copied whole to its capture
files and, line by line, to the run's logs. When the command exits, anything it left in
its group is stopped too; a cancel (timeout, stop) terminates the whole group (SIGTERM,
grace, SIGKILL). Every command is journalled as `command.start` / `command.done`.
Its own module because it is the process side of the executor; `executor` only walks
the graph.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from runtime.compiler.placeholders import render_argv
from runtime.core.errors import BadInput
from runtime.runs.context import Outcome, RunContext, Status
from runtime.runs.events import record_event
from runtime.store import safe
from runtime.store.layout import CapturePaths
from runtime.store.reads import read_bytes
from runtime.store.writes import ensure_dir, write_all

_READ_SIZE = 65536
_PIPE = -1  # subprocess.PIPE without importing subprocess at module import time
_CAPTURE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


@dataclass
class _Exit:
    """How the command ended, as far as known: still `failed` with no code if it never
    started, `cancelled` with no code while it is being waited for."""

    code: int | None = None
    status: Status = "failed"
    reason: str | None = None


async def run_leaf(
    ctx: RunContext,
    node: dict[str, Any],
    words: list[str],
    stdin: Path | None,
    attempt: int,
    values: dict[str, Any] | None = None,
) -> Outcome:
    """Run one command to completion; the caller's cancel scope stops its whole group."""
    try:
        argv = _resolve_command(render_argv(words, values if values is not None else ctx.values))
    except BadInput as exc:  # e.g. an index past an array's end: this node fails, clearly
        record_event(
            ctx.paths.events, ctx.instance, "node.error", node=node["id"], reason=exc.message
        )
        return Outcome("failed", 2, None, reason=exc.message)
    command_id = ctx.next_command_id()
    capture = ctx.paths.capture(command_id)
    ensure_dir(capture.dir)
    out_path, err_path = capture.stdout, capture.stderr
    out_fd = safe.open_file(out_path, _CAPTURE_FLAGS)
    try:
        err_fd = safe.open_file(err_path, _CAPTURE_FLAGS)
    except BaseException:
        os.close(out_fd)
        raise
    common = {"command_id": command_id, "node": node["id"], "label": node.get("label")}
    record_event(
        ctx.paths.events,
        ctx.instance,
        "command.start",
        command=ctx.display(argv),
        attempt=attempt,
        **common,
    )
    ctx.active += 1
    ctx.progress()
    started = trio.current_time()
    ended = _Exit()
    stdin_fd = safe.open_file(stdin, os.O_RDONLY) if stdin else os.open(os.devnull, os.O_RDONLY)
    try:
        await _launch(ctx, argv, stdin_fd, out_fd, err_fd, ended)
    finally:
        os.close(stdin_fd)
        os.close(out_fd)
        os.close(err_fd)
        done = _command_done(ctx, argv, ended, common, attempt, started, capture)
    return Outcome(
        ended.status, done["code"], _node_output(node, out_path, err_path), reason=ended.reason
    )


async def _launch(
    ctx: RunContext, argv: list[str], stdin_fd: int, out_fd: int, err_fd: int, ended: _Exit
) -> None:
    """Start the command and wait for it, keeping `ended` current (a cancel may cut in)."""
    try:
        proc = await trio.lowlevel.open_process(
            argv,
            stdin=stdin_fd,
            stdout=_PIPE,
            stderr=_PIPE,
            cwd=ctx.cwd,
            env=ctx.env,
            process_group=0,
        )
    except OSError as exc:
        message = f"actors: cannot start {argv[0]!r}: {exc.strerror}\n".encode()
        os.write(err_fd, message)
        os.write(ctx.log_fd("stderr"), message)
        ended.code = 127 if isinstance(exc, FileNotFoundError) else 126
        ended.reason = exc.strerror
        return
    ended.status = "cancelled"  # stays so unless _supervise returns normally
    ended.code, ended.status = await _supervise(ctx, proc, out_fd, err_fd)
    ended.reason = None if ended.status == "done" else f"exit code {ended.code}"


def _command_done(
    ctx: RunContext,
    argv: list[str],
    ended: _Exit,
    common: dict[str, Any],
    attempt: int,
    started: float,
    capture: CapturePaths,
) -> dict[str, Any]:
    """Count the command's end, journal `command.done` and hand it to the runner."""
    ctx.active -= 1
    duration_ms = round((trio.current_time() - started) * 1000)
    if ended.status == "done":
        ctx.completed += 1
    elif ended.status == "failed":
        ctx.failed += 1
    out_path, err_path = capture.stdout, capture.stderr
    done = {
        "code": ended.code if ended.code is not None else 143,
        "status": ended.status,
        "attempt": attempt,
        "duration_ms": duration_ms,
        "stdout_file": str(out_path),
        "stderr_file": str(err_path),
        "stdout_bytes": safe.lstat(out_path).st_size,
        "stderr_bytes": safe.lstat(err_path).st_size,
        **common,
    }
    record_event(ctx.paths.events, ctx.instance, "command.done", command=ctx.display(argv), **done)
    ctx.progress()
    if ctx.on_command_done is not None:
        ctx.on_command_done(done)
    return done


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _pump(stream: trio.abc.ReceiveStream, capture_fd: int, log_fd: int) -> None:
    """Copy a leaf's stream to its capture file and, whole lines at a time, to the log."""
    pending = b""
    try:
        while chunk := await stream.receive_some(_READ_SIZE):
            os.write(capture_fd, chunk)
            pending += chunk
            cut = pending.rfind(b"\n")
            if cut >= 0:
                os.write(log_fd, pending[: cut + 1])
                pending = pending[cut + 1 :]
    finally:
        if pending:
            os.write(log_fd, pending + b"\n")


def _resolve_command(argv: list[str]) -> list[str]:
    if argv and argv[0].startswith("~"):
        argv = [os.path.expanduser(argv[0]), *argv[1:]]
    return argv


def _node_output(node: dict[str, Any], out_path: Path, err_path: Path) -> Path | None:
    """The stream that is this node's result (and the next step's stdin): `output`."""
    kind = node.get("output") or "stdout"
    if kind == "stdout":
        return out_path
    if kind == "stderr":
        return err_path
    if kind == "none":
        return None
    both = CapturePaths(out_path.parent).both
    fd = safe.open_file(both, _CAPTURE_FLAGS)
    try:
        write_all(fd, read_bytes(out_path) + read_bytes(err_path), both)
    finally:
        os.close(fd)
    return both


async def _supervise(
    ctx: RunContext, proc: trio.Process, out_fd: int, err_fd: int
) -> tuple[int, Status]:
    """Wait for the leaf, then stop whatever it left in its group; on cancel, stop it all."""
    pgid = proc.pid
    pidfd = os.pidfd_open(proc.pid) if hasattr(os, "pidfd_open") else None
    try:
        async with trio.open_nursery() as nursery:
            assert proc.stdout is not None and proc.stderr is not None
            nursery.start_soon(_pump, proc.stdout, out_fd, ctx.log_fd("stdout"))
            nursery.start_soon(_pump, proc.stderr, err_fd, ctx.log_fd("stderr"))
            if pidfd is not None:
                # Exited but not yet reaped: its pid (= the group id) cannot be reused yet,
                # so stopping the leftovers of the group here can hit no stranger.
                await trio.lowlevel.wait_readable(pidfd)
            _kill_group(pgid, signal.SIGKILL)
            code = await proc.wait()
            # A process that left the group but kept our pipes open must not hang the step.
            nursery.cancel_scope.deadline = trio.current_time() + ctx.grace
        return code, "done" if code == 0 else "failed"
    finally:
        if proc.returncode is None:
            with trio.CancelScope(shield=True):
                _kill_group(pgid, signal.SIGTERM)
                with trio.move_on_after(ctx.grace):
                    await proc.wait()
                _kill_group(pgid, signal.SIGKILL)
                await proc.wait()
        if pidfd is not None:
            os.close(pidfd)

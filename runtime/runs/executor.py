"""Execute a compiled template graph with trio, one process group per leaf.

Semantics (docs/recipes.md has the user-facing version):
- a leaf's argv is rendered per word and executed without a shell, in its own process
  group; when its command exits, anything it left in that group is stopped too, and a
  timeout or stop terminates the whole group (SIGTERM, grace, SIGKILL);
- a sequence feeds each step the previous step's complete stdout on stdin; a parallel
  node gives every branch the same stdin and joins their outputs in order under
  `--- branch: <label> status: <s> ---` headers;
- `retry` is the maximum number of attempts, with `recover` run between failed ones;
- a failure's policy decides how far it reaches: `continue` (default) lets the rest run
  but still fails the enclosing node, `branch` stops the enclosing subtree up to the
  nearest parallel branch where it is contained (the run is then degraded), `root` aborts
  the whole run at once.
"""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import trio

from runtime.compiler.placeholders import MAX_REPEAT, render_argv, substitute_word, truthy
from runtime.compiler.redact import redact_text
from runtime.core.errors import BadInput
from runtime.runs.events import record_event, write_progress
from runtime.store.layout import CapturePaths, RunPaths
from runtime.store.writes import ensure_dir

Status = Literal["done", "failed", "timeout", "cancelled"]
Escalation = Literal["continue", "branch", "root"]
TIMEOUT_CODE = 124
_READ_SIZE = 65536


@dataclass
class Outcome:
    """What a node produced: its status, exit code and complete stdout (a file)."""

    status: Status
    code: int
    output: Path | None
    escalation: Escalation | None = None
    degraded: bool = False
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "done"


@dataclass
class RunContext:
    """Shared state of one execution (the runner owns exactly one)."""

    paths: RunPaths
    instance: str
    values: dict[str, Any]
    env: dict[str, str]
    cwd: str
    secrets: list[str]
    grace: float = 5.0
    stop_reason: str | None = None
    abort: dict[str, Any] | None = None
    root_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    active: int = 0
    completed: int = 0
    failed: int = 0
    branches: dict[str, str] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    _commands: int = 0
    _log_fds: dict[str, int] = field(default_factory=dict)
    on_command_done: Callable[[dict[str, Any]], None] | None = None

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.root_scope.cancel()

    def next_command_id(self) -> str:
        self._commands += 1
        return f"command-{self._commands:03d}"

    def progress(self) -> None:
        write_progress(
            self.paths.progress,
            self.instance,
            phase="running",
            active=self.active,
            completed=self.completed,
            failed=self.failed,
            branches=self.branches,
        )

    def log_fd(self, stream: str) -> int:
        fd = self._log_fds.get(stream)
        if fd is None:
            path = self.paths.stdout if stream == "stdout" else self.paths.stderr
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            fd = self._log_fds[stream] = os.open(path, flags, 0o600)
        return fd

    def close(self) -> None:
        for fd in self._log_fds.values():
            os.close(fd)
        self._log_fds.clear()

    def display(self, argv: list[str]) -> str:
        return redact_text(shlex.join(argv), self.secrets)


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
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    out_fd, err_fd = os.open(out_path, flags, 0o600), os.open(err_path, flags, 0o600)
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
    code: int | None = None
    status: Status = "failed"
    reason = None
    stdin_fd = (
        os.open(stdin, os.O_RDONLY | os.O_CLOEXEC) if stdin else os.open(os.devnull, os.O_RDONLY)
    )
    try:
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
            code, reason = (127 if isinstance(exc, FileNotFoundError) else 126), exc.strerror
        else:
            status = "cancelled"  # stays so unless _supervise returns normally
            code, status = await _supervise(ctx, proc, out_fd, err_fd)
            reason = None if status == "done" else f"exit code {code}"
    finally:
        os.close(stdin_fd)
        os.close(out_fd)
        os.close(err_fd)
        ctx.active -= 1
        duration_ms = round((trio.current_time() - started) * 1000)
        final_code = code if code is not None else 143
        if status == "done":
            ctx.completed += 1
        elif status == "failed":
            ctx.failed += 1
        done = {
            "code": final_code,
            "status": status,
            "attempt": attempt,
            "duration_ms": duration_ms,
            "stdout_file": str(out_path),
            "stderr_file": str(err_path),
            "stdout_bytes": out_path.stat().st_size,
            "stderr_bytes": err_path.stat().st_size,
            **common,
        }
        record_event(
            ctx.paths.events, ctx.instance, "command.done", command=ctx.display(argv), **done
        )
        ctx.progress()
        if ctx.on_command_done is not None:
            ctx.on_command_done(done)
    return Outcome(status, final_code, _node_output(node, out_path, err_path), reason=reason)


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
    both.write_bytes(out_path.read_bytes() + err_path.read_bytes())
    return both


_PIPE = -1  # subprocess.PIPE without importing subprocess at module import time


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


def _label(node: dict[str, Any], index: int) -> str:
    return str(node.get("label") or f"branch-{index}")


async def run_node(
    ctx: RunContext,
    node: dict[str, Any],
    stdin: Path | None,
    values: dict[str, Any] | None = None,
) -> Outcome:
    """Run a node with its when / repeat / delay / retry / recover / timeout / failure
    policy applied. `values` carries the enclosing repeat's index variables."""
    values = {
        **(node.get("scope_defaults") or {}),  # an imported recipe's defaults
        **(values if values is not None else ctx.values),
        **(node.get("scope") or {}),  # repeat variables; an import's own values
    }
    if node.get("when") is not None and not _when(node["when"], values):
        ctx.nodes.append(
            {
                "id": node["id"],
                "label": node.get("label"),
                "kind": node["kind"],
                "status": "skipped",
                "code": 0,
                "attempts": 0,
                "degraded": False,
                "reason": f"when {node['when']!r} is false",
            }
        )
        return Outcome("done", 0, stdin, reason="skipped")  # stdin passes through
    if node.get("repeat") is not None:
        group = _repeat_group(node, values)
        if isinstance(group, Outcome):
            return group
        return await run_node(ctx, group, stdin, values)
    if node.get("delay_ms"):
        await trio.sleep(node["delay_ms"] / 1000)
    outcome = Outcome("cancelled", 143, None)
    attempts = int(node.get("retry") or 1)
    for attempt in range(1, attempts + 1):
        outcome = await _attempt(ctx, node, stdin, attempt, values)
        if outcome.ok or ctx.stop_reason is not None or outcome.status == "cancelled":
            break
        if attempt < attempts and node.get("recover"):
            recovered = await run_leaf(ctx, node, node["recover"], None, attempt, values)
            if not recovered.ok:
                outcome.reason = f"{outcome.reason}; recover failed ({recovered.reason})"
                break
    ctx.nodes.append(
        {
            "id": node["id"],
            "label": node.get("label"),
            "kind": node["kind"],
            "status": outcome.status,
            "code": outcome.code,
            "attempts": attempt,
            "degraded": outcome.degraded,
            "reason": outcome.reason,
        }
    )
    if not outcome.ok and outcome.status != "cancelled":
        if outcome.escalation != "branch":
            outcome.escalation = node.get("failure") or "continue"
        ctx.failures.append(
            {
                "node": node["id"],
                "label": node.get("label"),
                "code": outcome.code,
                "status": outcome.status,
                "policy": outcome.escalation,
                "reason": outcome.reason,
            }
        )
        if outcome.escalation == "root" and ctx.abort is None:
            ctx.abort = {"node": node["id"], "label": node.get("label"), "code": outcome.code}
            ctx.stop("aborted")
    return outcome


def _when(condition: str, values: dict[str, Any]) -> bool:
    try:
        return truthy(substitute_word(condition, values))
    except BadInput:
        return False  # a condition on a missing value is false, as `{x??}` is


def _repeat_group(node: dict[str, Any], values: dict[str, Any]) -> dict[str, Any] | Outcome:
    """The node as a group of `repeat` instances, each with its own index variables."""
    spec = node["repeat"]
    try:
        count = int(spec if isinstance(spec, int) else substitute_word(spec, values))
    except (BadInput, ValueError) as exc:
        why = exc.message if isinstance(exc, BadInput) else f"{spec!r} is not a count"
        return Outcome("failed", 2, None, reason=f"repeat: {why}")
    parallel = bool(node.get("repeat_parallel"))
    limit = 64 if parallel else MAX_REPEAT
    if not 0 <= count <= limit:
        return Outcome("failed", 2, None, reason=f"repeat: {count} is outside 0-{limit}")
    if count == 0:
        return Outcome("done", 0, None, reason="repeat 0: nothing to run")
    label = node.get("label")
    instances = [
        {
            **node,
            "repeat": None,
            "repeat_parallel": None,
            "id": f"{node['id']}#{index}",
            "label": f"{label}-{index}" if label else f"{node['id']}#{index}",
            "scope": {
                "index": index,
                "prev": (index - 1) % count,
                "next": (index + 1) % count,
                "repeat": count,
            },
        }
        for index in range(count)
    ]
    return {
        "id": node["id"],
        "label": label,
        "kind": "parallel" if parallel else "sequence",
        "children": instances,
        "concurrency": node.get("concurrency"),
        "min_successful": node.get("min_successful"),
        "retry": 1,
        "failure": node.get("failure") or "continue",
    }


async def _attempt(
    ctx: RunContext, node: dict[str, Any], stdin: Path | None, attempt: int, values: dict[str, Any]
) -> Outcome:
    timeout_ms = node.get("timeout_ms")
    with trio.move_on_after(timeout_ms / 1000 if timeout_ms else float("inf")) as scope:
        if node["kind"] == "leaf":
            outcome = await run_leaf(ctx, node, node["words"], stdin, attempt, values)
        elif node["kind"] == "sequence":
            outcome = await _run_sequence(ctx, node, stdin, values)
        else:
            outcome = await _run_parallel(ctx, node, stdin, values)
    if scope.cancelled_caught:
        return Outcome("timeout", TIMEOUT_CODE, None, reason=f"timed out after {timeout_ms:g} ms")
    return outcome


async def _run_sequence(
    ctx: RunContext, node: dict[str, Any], stdin: Path | None, values: dict[str, Any]
) -> Outcome:
    current = stdin
    last: Outcome | None = None
    failed: Outcome | None = None
    degraded = False
    for child in node["children"]:
        last = await run_node(ctx, child, current, values)
        degraded = degraded or last.degraded
        if not last.ok:
            if last.status == "cancelled":
                return last
            failed = failed or last
            if last.escalation in ("branch", "root"):
                return Outcome(
                    last.status,
                    last.code,
                    last.output,
                    "branch" if last.escalation == "branch" else None,
                    degraded,
                    last.reason,
                )
        current = last.output
    assert last is not None
    if failed is not None:
        return Outcome("failed", failed.code, last.output, None, degraded, failed.reason)
    return Outcome("done", 0, last.output, None, degraded)


async def _run_parallel(
    ctx: RunContext, node: dict[str, Any], stdin: Path | None, values: dict[str, Any]
) -> Outcome:
    children = node["children"]
    results: list[Outcome | None] = [None] * len(children)
    limiter = trio.CapacityLimiter(node.get("concurrency") or len(children))
    labels = [_label(child, i) for i, child in enumerate(children, start=1)]

    async def branch(index: int) -> None:
        async with limiter:
            ctx.branches[labels[index]] = "running"
            result = await run_node(ctx, children[index], stdin, values)
            results[index] = result
            ctx.branches[labels[index]] = result.status

    async with trio.open_nursery() as nursery:
        for index in range(len(children)):
            nursery.start_soon(branch, index)
    final = [r or Outcome("cancelled", 143, None) for r in results]
    output = _join_outputs(ctx, node, labels, final)
    successes = sum(1 for r in final if r.ok)
    usable = sum(1 for r in final if _usable(r))
    counted_failures = [r for r in final if not r.ok and r.escalation != "branch"]
    contained = [r for r in final if not r.ok and r.escalation == "branch"]
    minimum = node.get("min_successful")
    ok = usable >= minimum if minimum is not None else not counted_failures and successes > 0
    degraded = ok and (len(contained) + len(counted_failures) > 0 or any(r.degraded for r in final))
    if ok:
        return Outcome("done", 0, output, None, degraded)
    worst = (counted_failures or contained or final)[0]
    reason = f"{successes} of {len(final)} branches succeeded"
    if minimum is not None:
        reason = f"{usable} of {len(final)} branches usable (minimum {minimum})"
    return Outcome("failed", worst.code or 1, output, None, False, reason)


def _usable(outcome: Outcome) -> bool:
    """A branch counts toward `min_successful` when it succeeded and produced output."""
    return outcome.ok and outcome.output is not None and outcome.output.stat().st_size > 0


def _join_outputs(
    ctx: RunContext, node: dict[str, Any], labels: list[str], results: list[Outcome]
) -> Path:
    path = ctx.paths.node_output(node["id"])
    ensure_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        minimum = node.get("min_successful")
        if minimum is not None:
            usable = sum(1 for r in results if _usable(r))
            state = (
                "complete"
                if usable == len(results)
                else "degraded"
                if usable >= minimum
                else "insufficient_data"
            )
            out.write(
                f"--- parallel_status: {state} usable: {usable} expected: "
                f"{len(results)} minimum: {minimum} ---\n".encode()
            )
        for label, result in zip(labels, results, strict=True):
            out.write(f"--- branch: {label} status: {result.status} ---\n".encode())
            if result.output and result.output.exists():
                data = result.output.read_bytes()
                out.write(data if data.endswith(b"\n") or not data else data + b"\n")
    return path

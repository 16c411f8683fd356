"""One command of the graph: its bookkeeping and its process.

The bookkeeping (`begin_leaf` / `end_leaf`): the command is rendered per word (no shell),
its capture files opened and `command.start` journaled; at its end the captures are
closed, `command.done` journaled, and the node's outcome made from its exit and its
`output` choice. The process (`Command`): started in its own process group, its two pipes
read as they fill (secrets masked, runtime.runner.output bounds both), its end seen on a
descriptor, its group stopped at the end; a cancel (a timeout, a stop) terminates the
whole group (SIGTERM, the grace, SIGKILL).

No thread and no event loop of its own: the runner's loop (runtime.runner.loop) polls the
descriptors a `Command` names (`fds()`), calls `readable()` for those that are ready and
`tick()` when a deadline it named (`deadline()`) has passed. So one poll() set serves
every command of a graph, and a parked runner waits on exactly the same descriptors.

How its end is seen: a pidfd (Linux), readable once the process has exited but before it
is reaped, so its pid (the group id) cannot be recycled while the group's leftovers are
stopped; or, where there is none, the SIGCHLD the loop turns into a call of `reaped()`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from runtime.compiler.placeholders import render_argv, substitute_word
from runtime.core import platform
from runtime.core.errors import BadInput
from runtime.runner.context import Outcome, RunContext, Status
from runtime.runner.output import (
    CHUNK,
    LOG_CAP_BYTES as LOG_CAP,
    Capture,
    LineSplitter,
    LogFile,
    StreamMasker,
    concatenate,
    trim,
)
from runtime.store import safe
from runtime.store.events import preview_fields, preview_text, record_event
from runtime.store.layout import CapturePaths
from runtime.store.writes import ensure_dir, patiently, write_json_atomic
from runtime.views.counts import CANCEL_CODE, exit_code


class Exit:
    """How the command ended, as far as known: still `failed` with no code if it never
    started, `cancelled` with no code while it is being waited for. (Plain classes, not
    dataclasses: see runtime.runner.context.)"""

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
        "request",
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
        request: Path | None = None,
    ) -> None:
        self.node, self.argv, self.kind, self.capture = node, argv, kind, capture
        self.out, self.err, self.common, self.attempt = out, err, common, attempt
        self.started, self.feeds, self.ended = started, feeds, ended
        self.request = request
        """A command on a host: its words, the step's stdin (`on_host`); None here."""


def begin_leaf(
    ctx: RunContext,
    node: dict[str, Any],
    words: list[str],
    attempt: int,
    values: dict[str, Any] | None = None,
    *,
    feeds: bool = False,
    recover: bool = False,
) -> Leaf | Outcome:
    """Render the command, open its captures and journal `command.start`; an Outcome
    when the command cannot even be rendered (runtime.runner.command runs it)."""
    try:
        values = values if values is not None else ctx.values
        argv = render_argv(words, values)
        host = None if recover else host_of(node, values)
        words_there, argv = argv, _resolve_command(argv) if host is None else on_host(host, argv)
    except BadInput as exc:  # e.g. an index past an array's end: this node fails, clearly
        record_event(
            ctx.paths.events, ctx.instance, "node.error", node=node["id"], reason=exc.message
        )
        return Outcome("failed", 2, None, reason=preview_text(exc.message))
    command_id = ctx.next_command_id()
    capture = ctx.paths.capture(command_id)
    # a full disk makes the command wait to start, never fails the run (patiently)
    patiently(lambda: ensure_dir(capture.dir), f"create {capture.dir}")
    request = None
    if host is not None:  # the words go on the step's stdin, never in its command line
        request = path = capture.host_step
        patiently(lambda: write_json_atomic(path, {"argv": words_there}), f"write {path}")
    kind = node.get("output") or "stdout"
    out_cap = None if feeds and kind in ("stdout", "both") else LOG_CAP
    err_cap = None if feeds and kind in ("stderr", "both") else LOG_CAP
    out = patiently(lambda: Capture(capture.stdout, out_cap), f"open {capture.stdout}")
    err = patiently(lambda: Capture(capture.stderr, err_cap), f"open {capture.stderr}")
    common: dict[str, Any] = {
        "command_id": command_id,
        "node": node["id"],
        "label": node.get("label"),
    }
    if recover:  # not an attempt of the step: runtime.views.counts
        common["recover"] = True
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
    ctx.steps.started(node["id"], recover=recover)
    ctx.progress()
    return Leaf(
        node, argv, kind, capture, out, err, common, attempt, time.monotonic(), feeds, Exit(),
        request,
    )  # fmt: skip


def _forget_request(leaf: Leaf) -> None:
    """A command on a host's words (they may hold a secret) go once the step has them
    open as its stdin, or once it will never start: no copy stays outside run.json."""
    if leaf.request is not None:
        try:
            leaf.request.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only captures dir: the run goes on; the file is 0600


def end_leaf(ctx: RunContext, leaf: Leaf) -> Outcome:
    """Close the captures, journal `command.done` and return the node's outcome."""
    leaf.out.close()
    leaf.err.close()
    _forget_request(leaf)  # a command stopped before it was started
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
    duration_ms = round((time.monotonic() - started) * 1000)
    ctx.steps.ended(common["node"], ended.status, recover=bool(common.get("recover")))
    out, err = captures
    code = CANCEL_CODE if ended.code is None else ended.code
    done = {
        "command": ctx.display(argv),  # masked and bounded: what a failure report names
        "code": exit_code(ended.status, code),
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


def host_of(node: dict[str, Any], values: dict[str, Any]) -> str | None:
    """The host a node's command runs on (its `host`, rendered: a name or a comma list,
    of which a `repeat`'s instance K takes name K mod their number), or None: here."""
    names = [n.strip() for n in substitute_word(node.get("host") or "", values).split(",")]
    names = [n for n in names if n]
    if not names:
        return None
    index = values.get("index", 0)
    return names[(index if isinstance(index, int) else 0) % len(names)]


def on_host(host: str, argv: list[str]) -> list[str]:
    """The command run on `host` as a remote run of this one (`actors host step`, the
    same path as `spawn --host`): it ends with the remote run, and stops it there when
    stopped. A process boundary: the runner never imports the hosts room above it.
    This is what the journal shows (masked); the process is started with only its part
    before `--`, the words reaching it on stdin (Leaf.request), so no word of the
    command, a secret least of all, is in a command line here or on the host."""
    return [sys.executable, "-m", "actors", "host", "step", host, "--", *argv]


def _started_argv(leaf: Leaf) -> list[str]:
    """The argv a leaf's process is started with (a host step's words stay off it)."""
    return leaf.argv if leaf.request is None else leaf.argv[: leaf.argv.index("--")]


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


RUNNING, DRAINING, STOPPING, ENDED = "running", "draining", "stopping", "ended"


class Stream:
    """One of the command's two pipes, on its way to its capture and the run's log."""

    __slots__ = ("capture", "fd", "lines", "masker")

    def __init__(
        self, fd: int, capture: Capture, log: LogFile, masker: StreamMasker, pending: bytes = b""
    ) -> None:
        self.fd, self.capture, self.masker = fd, capture, masker
        self.lines = LineSplitter(log, pending)

    def take(self, data: bytes) -> None:
        self.capture.write(data)
        self.lines.feed(data)

    def read(self) -> bool:
        """Copy what is there; False at the end of the stream (then closed)."""
        try:
            chunk = os.read(self.fd, CHUNK)
        except BlockingIOError:
            return True
        if chunk:
            self.take(self.masker.feed(chunk))
            return True
        self.close()
        return False

    def close(self) -> None:
        """What the masker held and the partial line go out; the pipe is closed."""
        if self.fd < 0:
            return
        self.take(self.masker.flush())
        self.lines.flush()
        os.close(self.fd)
        self.fd = -1


def executable(name: str, env: dict[str, str]) -> str:
    """`name` found on the command's own PATH, as subprocess finds it (posix_spawnp
    would search the runner's)."""
    if "/" in name:
        return name
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


class Command:
    """A leaf's command from its start to its `command.done`."""

    def __init__(self, ctx: RunContext, leaf: Leaf) -> None:
        self.ctx, self.leaf = ctx, leaf
        self.pid = self.pidfd = -1
        self.streams: list[Stream] = []
        self.state = RUNNING
        self.code: int | None = None
        self.until: float | None = None
        """The deadline of the current state: the end of the drain, or of the grace."""
        self.outcome: Outcome | None = None

    # --- start ----------------------------------------------------------------------

    def launch(self, stdin: Path | None) -> None:
        """Start the command (no shell, its own process group, stdin from the previous
        step's output or /dev/null, stdout and stderr on pipes). A command that cannot
        start ends at once (127 / 126), as a leaf that never ran."""
        leaf, ctx = self.leaf, self.ctx
        pipes = [os.pipe(), os.pipe()]
        stdin = leaf.request or stdin
        try:
            stdin_fd = (
                safe.open_file(stdin, os.O_RDONLY) if stdin else os.open(os.devnull, os.O_RDONLY)
            )
        except OSError as exc:
            self._not_started(pipes, exc)
            return
        finally:
            _forget_request(leaf)
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin_fd, 0),
            (os.POSIX_SPAWN_DUP2, pipes[0][1], 1),
            (os.POSIX_SPAWN_DUP2, pipes[1][1], 2),
        ]
        try:
            if ctx.cwd_error is not None:
                raise ctx.cwd_error
            # as subprocess does: a child starts with SIGPIPE and SIGXFSZ default
            self.pid = os.posix_spawn(
                executable(leaf.argv[0], ctx.env),
                _started_argv(leaf),
                ctx.env,
                file_actions=actions,
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except OSError as exc:
            self._not_started(pipes, exc)
            return
        finally:
            os.close(stdin_fd)
        self.pidfd = platform.exit_fd(self.pid)
        leaf.ended.status = "cancelled"  # stays so unless the command ends on its own
        for (read, write), capture, name in zip(
            pipes, (leaf.out, leaf.err), ("stdout", "stderr"), strict=True
        ):
            os.close(write)
            os.set_blocking(read, False)
            masker = StreamMasker(ctx.secrets)
            self.streams.append(Stream(read, capture, ctx.log(name), masker))

    def _not_started(self, pipes: list[tuple[int, int]], exc: OSError) -> None:
        for read, write in pipes:
            os.close(read)
            os.close(write)
        not_started(self.ctx, self.leaf.err, self.leaf.ended, self.leaf.argv, exc)
        self._end()

    # --- what the loop waits on -------------------------------------------------------

    def fds(self) -> list[int]:
        """Descriptors to poll: the exit watch while the process lives, its pipes until
        their end (or the drain's deadline)."""
        if self.state == ENDED:
            return []
        out = [s.fd for s in self.streams if s.fd >= 0] if self.state != STOPPING else []
        if self.pidfd >= 0 and self.code is None:
            out.append(self.pidfd)
        return out

    def deadline(self) -> float | None:
        return self.until if self.state in (DRAINING, STOPPING) else None

    def readable(self, fd: int) -> None:
        if fd == self.pidfd and self.code is None:
            self._exited()
            return
        for stream in self.streams:
            if stream.fd == fd:
                stream.read()
        if self.state == DRAINING and all(s.fd < 0 for s in self.streams):
            self._finish()

    def reaped(self) -> None:
        """Without a pidfd: SIGCHLD arrived; see whether this process is the one."""
        if self.code is None and self.pid > 0 and platform.has_exited(self.pid):
            self._exited()

    def tick(self, now: float) -> None:
        if self.until is None or now < self.until:
            return
        if self.state == DRAINING:  # a process that left the group holds our pipes
            self._finish()
        elif self.state == STOPPING:
            self._kill()

    # --- the end ----------------------------------------------------------------------

    def _exited(self) -> None:
        """The command ended: stop what it left in its group (its pid, the group id, is
        still ours until reaped), reap it, then read its pipes to their end, at most
        the grace period (a process that left the group may hold them)."""
        kill_group(self.pid, signal.SIGKILL)
        self.code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        self._close_pidfd()
        if self.state == STOPPING:
            self._end()
            return
        self.state, self.until = DRAINING, time.monotonic() + self.ctx.grace
        for stream in self.streams:
            if stream.fd >= 0:
                while stream.read() and stream.fd >= 0:  # what is buffered now, at once
                    if not self._more(stream.fd):
                        break
        if all(s.fd < 0 for s in self.streams):
            self._finish()

    @staticmethod
    def _more(fd: int) -> bool:
        import select

        return bool(select.select([fd], [], [], 0)[0])

    def _finish(self) -> None:
        assert self.code is not None
        exited(self.leaf.ended, self.code)
        self._end()

    def stop(self, grace: float | None = None, *, timed_out: bool = False) -> None:
        """Cancel: SIGTERM to the whole group, the grace period, then SIGKILL (the
        leader stays unreaped until then, so the group id stays ours). A command its
        node's timeout stopped ends `timeout`, code 124 (runtime.views.counts)."""
        if self.state in (ENDED, STOPPING):
            return
        self.leaf.ended = Exit(status="timeout" if timed_out else "cancelled")
        if self.code is not None:  # exited already, only draining: stop reading
            self._end()
            return
        self._close_streams()
        self.state = STOPPING
        grace = self.ctx.grace if grace is None else grace
        kill_group(self.pid, signal.SIGTERM)
        self.until = time.monotonic() + grace
        if grace <= 0:
            self._kill()

    def _kill(self) -> None:
        kill_group(self.pid, signal.SIGKILL)
        self.until = None  # the exit watch reports the death

    def _end(self) -> None:
        self._close_streams()
        self._close_pidfd()
        self.state, self.until = ENDED, None
        self.outcome = end_leaf(self.ctx, self.leaf)

    def _close_streams(self) -> None:
        for stream in self.streams:
            stream.close()

    def _close_pidfd(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    @property
    def ended(self) -> bool:
        return self.state == ENDED

    # --- across a park --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        leaf = self.leaf
        return {
            "pid": self.pid,
            "pidfd": self.pidfd,
            "state": self.state,
            "code": self.code,
            "until": self.until,
            "leaf": {
                "node": leaf.node["id"],
                "argv": leaf.argv,
                "kind": leaf.kind,
                "common": leaf.common,
                "attempt": leaf.attempt,
                "started": leaf.started,
                "feeds": leaf.feeds,
                "ended": [leaf.ended.code, leaf.ended.status, leaf.ended.reason],
                "captures": [[c.fd, c.total, c.cap] for c in (leaf.out, leaf.err)],
            },
            "streams": [[s.fd, s.masker.held.hex(), s.lines.pending.hex()] for s in self.streams],
        }

    def fds_kept(self) -> list[int]:
        kept = [self.pidfd, *(c.fd for c in (self.leaf.out, self.leaf.err))]
        return [fd for fd in kept + [s.fd for s in self.streams] if fd >= 0]

    @classmethod
    def restore(cls, ctx: RunContext, node: dict[str, Any], state: dict[str, Any]) -> Command:
        saved = state["leaf"]
        capture = ctx.paths.capture(saved["common"]["command_id"])
        out, err = (
            Capture.adopt(path, cap, fd, total)
            for path, (fd, total, cap) in zip(
                (capture.stdout, capture.stderr), saved["captures"], strict=True
            )
        )
        code, status, reason = saved["ended"]
        leaf = Leaf(
            node, saved["argv"], saved["kind"], capture, out, err, saved["common"],
            saved["attempt"], saved["started"], saved["feeds"], Exit(code, status, reason),
        )  # fmt: skip
        command = cls(ctx, leaf)
        command.pid, command.pidfd, command.state = state["pid"], state["pidfd"], state["state"]
        command.code, command.until = state["code"], state["until"]
        for (fd, held, pending), cap, name in zip(
            state["streams"], (out, err), ("stdout", "stderr"), strict=True
        ):
            masker = StreamMasker(ctx.secrets, bytes.fromhex(held))
            command.streams.append(Stream(fd, cap, ctx.log(name), masker, bytes.fromhex(pending)))
        return command

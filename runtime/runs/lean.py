"""The lean runner: a run whose graph is one command, supervised with poll(), no trio.

Most runs are one command (`actors spawn -t CMD`, most tools), and their runner spends
nearly all its life waiting on it. Under trio that wait costs a whole trio runtime per
run (~15 MB PSS, ~120 ms of CPU to start; docs/performance.md, Lean idle runs). This runner
keeps the same duties on one poll() set and reuses the trio runner's own parts: the
leaf's bookkeeping (runtime.runs.leaf), masking and logs (runtime.runs.output), the
timeout, SIGTERM / SIGINT / SIGHUP as a graceful stop, `control.stop` / `control.kill`
from the inbox (its doorbell), the guardian of the runs it spawns
(runtime.runs.guard_plan), and the end (runtime.runs.runner: result.json, follow-ups).

When nothing has happened for a while it parks (runtime.runs.lean_park): it exec()s
into runtime/runs/entry.py's idle wait, which keeps the pid, the argv, the children and
the descriptors (so its identity still verifies) and imports nothing, and which exec()s
back here on any event. Any other graph runs on the trio runner.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.core import config
from runtime.core.ids import now_iso
from runtime.core.process import replay_early_stops
from runtime.runs.context import Outcome
from runtime.runs.events import record_advisory
from runtime.runs.leaf import Leaf, end_leaf, exited, kill_group, not_started
from runtime.runs.lean_parts import (
    Stream,
    apply_control,
    claim_controls,
    control_box,
    drain,
    executable,
)
from runtime.runs.output import StreamMasker
from runtime.runs.status import plain_command

if TYPE_CHECKING:
    from runtime.runs.context import RunContext
    from runtime.runs.step_followups import ThreadDeliveries
    from runtime.store.layout import RunPaths
    from runtime.store.records import RunRecord

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def inherited() -> list[int]:
    """Descriptors past stderr that a child would inherit (ones the caller of spawn
    passed down to the runner): closed in the command, as subprocess's close_fds does
    for the trio runner's commands."""
    fds = [int(name) for name in os.listdir("/proc/self/fd") if int(name) > 2]
    found = []
    for fd in fds:
        try:
            if os.get_inheritable(fd):
                found.append(fd)
        except OSError:
            continue  # the listing's own descriptor, closed by now
    return found


def handles(run: RunRecord) -> bool:
    """Is this a run the lean runner supervises? One plain command (a timeout, an
    output choice and a failure policy allowed), on Linux with pidfds, and no
    `retire_when` watcher; anything else (and ACTORS_TRIO_RUNNER) runs under trio."""
    node = run.get("template") or {}
    if config.flag(config.TRIO_RUNNER) or run.get("retire_when") == "children_terminal":
        return False
    if not all(hasattr(os, name) for name in ("pidfd_open", "memfd_create", "posix_spawn")):
        return False
    return plain_command(node) and run.get("cwd") == os.getcwd()


class Lean:
    """One lean run: its command, the descriptors it waits on and how it is stopped."""

    def __init__(self, paths: RunPaths, run: RunRecord, ctx: RunContext) -> None:
        self.paths, self.run, self.ctx = paths, run, ctx
        self.leaf: Leaf | None = None
        self.pid = self.pidfd = -1
        self.streams: list[Stream] = []
        self.bells: dict[str, tuple[int, int, str]] = {}
        """name -> (read end, write end, FIFO path) of this runner's doorbells. The write
        end is our own, so the read end never reports a hang-up across a park."""
        self.owns_bells = False
        """True in the image that made the doorbells (its `with` blocks remove them)."""
        self.children: dict[str, int] = {}
        """run id -> pidfd of each child run's runner this runner guards."""
        self.deadline: float | None = None
        self.timed_out = False
        self.started, self.started_at = time.monotonic(), now_iso()
        self.last_event = time.monotonic()
        self.linger = LINGER_MIN_S
        self.wakeup = -1
        self.deliveries: ThreadDeliveries | None = None
        self.park: Callable[[Lean], None] | None = None
        """exec() into the idle wait (runtime.runs.lean_park.park); None: never park."""

    # --- start --------------------------------------------------------------------

    def launch(self, leaf: Leaf) -> None:
        """Start the command in its own process group, stdout and stderr on pipes."""
        self.leaf = leaf
        timeout_ms = self.run["template"].get("timeout_ms")
        self.deadline = self.started + timeout_ms / 1000 if timeout_ms else None
        pipes = [os.pipe(), os.pipe()]
        stdin = os.open(os.devnull, os.O_RDONLY)
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin, 0),
            (os.POSIX_SPAWN_DUP2, pipes[0][1], 1),
            (os.POSIX_SPAWN_DUP2, pipes[1][1], 2),
            *((os.POSIX_SPAWN_CLOSE, fd) for fd in inherited()),
        ]
        try:
            # as subprocess does for trio: a child starts with SIGPIPE and SIGXFSZ default
            self.pid = os.posix_spawn(
                executable(leaf.argv[0], self.ctx.env),
                leaf.argv,
                self.ctx.env,
                file_actions=actions,
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except OSError as exc:
            not_started(self.ctx, leaf.err, leaf.ended, leaf.argv, exc)
            for read, write in pipes:
                os.close(read)
                os.close(write)
            return
        finally:
            os.close(stdin)
        self.pidfd = os.pidfd_open(self.pid)
        leaf.ended.status = "cancelled"  # stays so unless the command ends on its own
        for (read, write), capture, stream in zip(
            pipes, (leaf.out, leaf.err), ("stdout", "stderr"), strict=True
        ):
            os.close(write)
            os.set_blocking(read, False)
            self.streams.append(Stream(read, capture, self.ctx.log(stream), self._masker()))

    def _masker(self, held: bytes = b"") -> StreamMasker:
        return StreamMasker(self.ctx.secrets, held)

    def listen(self) -> None:
        """The doorbells this runner is woken by, and its stop signals."""
        from runtime.messaging.boxes import control_mailbox
        from runtime.messaging.doorbells import doorbell
        from runtime.runs.launch import guardian_bells
        from runtime.store.layout import StateRoot

        places = {
            "control": (control_mailbox(self.paths).doorbells, "control"),
            "guardian": (guardian_bells(StateRoot.from_env(), f"run:{self.run['run']}"), None),
        }
        for name, (where, topic) in places.items():
            read = _EXITS.enter_context(doorbell(where, topic=topic))
            write = os.open(f"/proc/self/fd/{read}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            self.bells[name] = (read, write, os.readlink(f"/proc/self/fd/{read}"))
        self.owns_bells = True
        self.watch_signals()

    def watch_signals(self) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        for sig in STOP_SIGNALS:
            signal.signal(sig, _noted)
        self.wakeup = read
        replay_early_stops()

    # --- the wait -----------------------------------------------------------------

    def supervise(self) -> Outcome | None:
        """Wait for the command; its outcome, or None when the run was stopped."""
        self.claim_controls()
        while self.pidfd >= 0:
            if self.ctx.stop_reason is not None or self.timed_out:
                return self.stop()
            ready = self.wait(self.timeout())
            if not ready:
                self.idle()
                continue
            self.last_event = time.monotonic()
            if self.pidfd in ready:
                return self.exited()
            for fd in ready:
                self.handle(fd)
        return None

    def timeout(self) -> float:
        now = time.monotonic()
        until = self.last_event + self.linger
        if self.deadline is not None:
            until = min(until, self.deadline)
        return max(0.0, until - now)

    def wait(self, timeout: float | None) -> set[int]:
        poller = select.poll()
        for fd in self.fds():
            poller.register(fd, select.POLLIN)
        ms = None if timeout is None else int(timeout * 1000) + 1
        return {fd for fd, _ in poller.poll(ms)}

    def fds(self) -> list[int]:
        bells = [read for read, _, _ in self.bells.values()]
        streams = [s.fd for s in self.streams if s.fd >= 0]
        return [self.pidfd, self.wakeup, *bells, *streams, *self.children.values()]

    def idle(self) -> None:
        """Nothing happened for a while: past the timeout, stop; else park."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.timed_out = True
            return
        if self.holding():  # output a full disk did not take lives in this image only
            self.linger = HOLDING_RETRY_S
            return
        if self.park is None:
            self.linger = LINGER_MAX_S
            return
        self.park(self)  # exec: returns only if it could not

    def holding(self) -> bool:
        """Write what the disk did not take yet; True while some is still held."""
        held = [h for s in self.streams for h in (s.capture.held, s.lines.log.held)]
        return any(not h.retry() for h in held if h.holding)

    def handle(self, fd: int) -> None:
        if fd == self.wakeup:
            self.signalled(os.read(fd, 64))
        elif fd == self.bells["control"][0]:
            drain(fd)
            self.claim_controls()
        elif fd == self.bells["guardian"][0]:
            drain(fd)
            self.guard_children()
        elif fd in self.children.values():
            self.child_gone(fd)
        else:
            for stream in self.streams:
                if stream.fd == fd:
                    stream.read()

    def signalled(self, signums: bytes) -> None:
        for signum in signums:
            record_advisory(
                self.paths.events,
                self.ctx.instance,
                "run.signal",
                signal=signal.Signals(signum).name,
            )
            self.ctx.stop("cancelled")

    def claim_controls(self) -> None:
        """control.* messages from the inbox, applied as the trio runner applies them."""
        box = control_box(self.paths)
        if box is None:
            return
        for entry in claim_controls(box):
            apply_control(self.ctx, box, entry)

    def guard_children(self) -> None:
        """A run this run spawned has recorded its identity: watch its runner's pidfd
        (fold it now when it is already gone), as runtime.runs.guardian does."""
        from runtime.core.process import pidfd_open, verify
        from runtime.runs.guard_plan import WATCH, fold, plan
        from runtime.store.layout import StateRoot

        root, me = StateRoot.from_env(), f"run:{self.run['run']}"
        for run_id, action, identity in plan(root, me, frozenset(self.children)):
            fd = pidfd_open(identity["pid"]) if action == WATCH else None
            if fd is not None and verify(identity)[0] == "valid":
                self.children[run_id] = fd
                continue
            if fd is not None:
                os.close(fd)
            fold(root, me, run_id)

    def child_gone(self, fd: int) -> None:
        from runtime.runs.guard_plan import fold
        from runtime.store.layout import StateRoot

        run_id = next(r for r, f in self.children.items() if f == fd)
        del self.children[run_id]
        os.close(fd)
        fold(StateRoot.from_env(), f"run:{self.run['run']}", run_id)

    # --- the end ------------------------------------------------------------------

    def exited(self) -> Outcome:
        """The command ended: stop what it left in its group (its pid, the group id, is
        still ours until reaped), reap it, then read its pipes to their end (at most the
        grace period: a process that left the group may hold them)."""
        assert self.leaf is not None
        kill_group(self.pid, signal.SIGKILL)
        code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        self.close_pidfd()
        drain_until = time.monotonic() + self.ctx.grace
        while any(s.fd >= 0 for s in self.streams):
            left = drain_until - time.monotonic()
            ready = self.wait_streams(left) if left > 0 else set()
            if not ready:
                break
            for stream in self.streams:
                if stream.fd in ready:
                    stream.read()
        self.close_streams()
        exited(self.leaf.ended, code)
        return end_leaf(self.ctx, self.leaf)

    def wait_streams(self, timeout: float) -> set[int]:
        poller = select.poll()
        for stream in self.streams:
            if stream.fd >= 0:
                poller.register(stream.fd, select.POLLIN)
        return {fd for fd, _ in poller.poll(int(timeout * 1000) + 1)}

    def stop(self) -> Outcome | None:
        """A stop or the timeout: the whole group gets SIGTERM, the grace period, then
        SIGKILL (its leader unreaped until then, so the group id stays ours)."""
        assert self.leaf is not None
        self.close_streams()
        kill_group(self.pid, signal.SIGTERM)
        if self.ctx.grace > 0:
            select.select([self.pidfd], [], [], self.ctx.grace)
        kill_group(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.close_pidfd()
        end_leaf(self.ctx, self.leaf)  # journals command.done (cancelled), as under trio
        if not self.timed_out:
            return None  # stopped: the run's verdict comes from ctx.stop_reason
        timeout_ms = self.run["template"]["timeout_ms"]
        return Outcome("timeout", 124, None, reason=f"timed out after {timeout_ms:g} ms")

    def close_streams(self) -> None:
        for stream in self.streams:
            stream.close()

    def close_pidfd(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1

    def close(self) -> None:
        """Doorbells and pidfds; the doorbell FIFOs removed (an earlier image of this
        process made them, so no `with` block is left to do it)."""
        for read, write, path in self.bells.values():
            os.close(write)
            if not self.owns_bells:
                os.close(read)
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if self.owns_bells:
            _EXITS.close()
        self.bells.clear()
        for fd in self.children.values():
            os.close(fd)
        self.children.clear()


LINGER_MIN_S = 0.25
"""How long a lean runner stays up after an event before it parks; after a wake it
stays twice as long as the quiet spell before it, up to LINGER_MAX_S, so a command that
prints every few seconds keeps it up and one that prints rarely costs one exec each time."""
LINGER_MAX_S = 30.0
HOLDING_RETRY_S = 2.0
"""While output is held for a full disk (runtime.runs.output.Held), how often an idle
lean runner tries to write it, instead of parking (the held bytes are in its memory)."""


def _noted(signum: int, frame: Any) -> None:
    """A stop signal: noted through the wakeup pipe, handled in the loop."""


_EXITS = contextlib.ExitStack()
"""The `with` blocks this image entered (its doorbells): closed at the end, or left to
exec() when the runner parks."""

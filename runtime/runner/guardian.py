"""Guardians: the long-lived processes a session already has fold its crashed runs.

A runner killed with SIGKILL writes no result and sends no follow-up, and the command it
left behind keeps running. No daemon watches for that: `actors inbox wait`, `actors mcp`,
the dashboard and the runner of a run with children each keep a `Guard` of the owner
whose follow-ups they wait for (a session, or `run:<id>` for the runs a run spawned), and
fold a dead runner's run (runtime.runner.fold.fold_run: its processes stopped,
`exited` published, one follow-up) as soon as it dies.

Nothing here polls and nothing here has an event loop of its own: a `Guard` names the
descriptors to wait on (`fds()`) and is told which one is ready (`handle()`), so the
runner's poll loop, `inbox wait`'s and a thread of the MCP server (`guarding`) all use
the one implementation. Each watched runner has an exit watch (runtime.core.platform:
its pidfd, or on the portable path a shared lock on the runner's liveness file), opened
before its recorded identity (pid, start ticks, boot id, argv) is verified, so it pins
that very process and a pid reused later is never taken for the runner. New runs are
found through a doorbell: every runner rings its owner's `guardians/` FIFOs once its
identity is recorded, and the guard plans the owner's runs again. A guard that starts
after a crash folds it in its first scan. Several guardians of one session race
harmlessly: `fold_run` works under the run's fold lock, so exactly one follow-up is
submitted. What stays for `actors reconcile`: a run whose runner's identity was never
recorded.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from collections.abc import Iterator
from typing import Any

from runtime.core.errors import ActorsError, resource_error
from runtime.core.platform import ExitWatch
from runtime.core.process import verify
from runtime.messaging.doorbells import Bell
from runtime.runner.bells import guardian_bells
from runtime.runner.fold import fold_run
from runtime.store.layout import StateRoot
from runtime.views.index import list_runs
from runtime.views.status import TERMINAL, load_run, runner_identity

WATCH, FOLD, WAIT = "watch", "fold", "wait"
PIDFD_SHARE = 4
"""The guardians of a process hold at most 1/PIDFD_SHARE of its descriptor limit in
pidfds, so a session with thousands of live runs never starves the server they run in
(past it, the portable exit watch serves)."""

_pidfds_held = 0


def pidfd_budget() -> int:
    """How many pidfds the watchers of one process may hold (1/PIDFD_SHARE of its
    descriptor limit)."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 16 if soft == resource.RLIM_INFINITY else max(16, soft // PIDFD_SHARE)


def log(owner: str | None, what: str) -> None:
    """One line on stderr (the harness's log of the process): a guardian never raises
    into the command or server it runs in."""
    print(f"actors: guardian of {owner or 'every run'}: {what}", file=sys.stderr, flush=True)


def classify(root: StateRoot, run_id: str) -> tuple[str, dict[str, Any] | None]:
    """What a run of the owner needs now: `watch` (its runner is verified alive; with its
    identity), `fold` (the runner is proven gone or its pid is another process's now),
    or `wait` (no identity yet: its runner's ring will bring it back; or unverifiable)."""
    paths = root.run(run_id)
    if paths.followup.exists():
        return WAIT, None  # settled (list_runs saw it a moment before the marker)
    identity = runner_identity(paths, load_run(paths))
    if identity is None:
        return WAIT, None
    verdict, _reason = verify(identity)
    if verdict == "valid":
        return WATCH, identity
    return (FOLD, None) if verdict in ("dead", "mismatch") else (WAIT, None)


def plan(root: StateRoot, owner: str | None, busy: frozenset[str]) -> list[tuple[str, str, Any]]:
    """(run, action, identity) for every run of `owner` (None: of every owner) that is
    not settled nor already being watched. A run is settled once its follow-up marker
    exists."""
    plans = []
    for summary in list_runs(root):
        run_id = summary["run"]
        if (owner is not None and summary.get("owner_id") != owner) or run_id in busy:
            continue
        if summary.get("status") in TERMINAL and root.run(run_id).followup.exists():
            continue
        try:
            action, identity = classify(root, run_id)
        except (ActorsError, OSError) as exc:
            log(owner, f"run {run_id}: {exc}")
            continue
        if action != WAIT:
            plans.append((run_id, action, identity))
    return plans


def fold(root: StateRoot, owner: str | None, run_id: str) -> None:
    try:
        fold_run(root, root.run(run_id))
    except Exception as exc:  # one bad run must not stop the guardian
        log(owner, f"run {run_id}: {type(exc).__name__}: {exc}")


class Guard:
    """The guardian of one owner's runs, driven by its host's wait (see the module)."""

    def __init__(
        self,
        root: StateRoot,
        owner: str | None,
        bell: Bell | None = None,
        watches: dict[str, ExitWatch] | None = None,
    ) -> None:
        """`owner` None guards every run of the root (`actors watch`). `bell` and
        `watches`: what a host already holds (a runner that rang up or parked with
        them); otherwise the bell is armed here, before the first scan."""
        global _pidfds_held
        self.root, self.owner = root, owner
        self.bell = bell if bell is not None else Bell.open(guardian_bells(root, owner))
        self.watches: dict[str, ExitWatch] = dict(watches or {})
        _pidfds_held += sum(w.by_pidfd for w in self.watches.values())

    def fds(self) -> list[int]:
        return [self.bell.read, *(w.fd for w in self.watches.values())]

    def handle(self, fd: int) -> bool:
        """React to a ready descriptor; False when it is not one of this guard's."""
        if fd == self.bell.read:
            self.bell.drain()
            self.scan()
            return True
        for run_id, watch in list(self.watches.items()):
            if watch.fd == fd:
                self._unwatch(run_id)
                fold(self.root, self.owner, run_id)
                if not self.root.run(run_id).followup.exists():
                    self.scan()  # not settled (its runner lives on, or the fold failed): again
                return True
        return False

    def scan(self, *, fail_fast: bool = False) -> None:
        """Plan the owner's runs again: watch the live ones, fold the dead ones now. With
        `fail_fast` (the first scan of a command that can end with one line instead:
        `inbox wait`), a scan the machine cannot make (no descriptor left) raises."""
        global _pidfds_held
        try:
            plans = plan(self.root, self.owner, frozenset(self.watches))
        except Exception as exc:  # an untrusted runs/ directory, say: the next ring retries
            if fail_fast and resource_error(exc, str(self.root.path)) is not None:
                raise
            log(self.owner, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
            return
        for run_id, action, identity in plans:
            watch = None
            if action == WATCH:
                liveness = str(self.root.run(run_id).liveness)
                pidfd_ok = _pidfds_held < pidfd_budget()
                watch = ExitWatch.open(identity["pid"], liveness, prefer_pidfd=pidfd_ok)
            # verified after the watch was opened: it pins the runner, not a successor
            if watch is not None and verify(identity)[0] == "valid":
                self.watches[run_id] = watch
                _pidfds_held += watch.by_pidfd
                continue
            if watch is not None:
                watch.close()
            fold(self.root, self.owner, run_id)

    def crosses_exec(self) -> bool:
        """Whether every watch survives its host's exec() (a parked runner keeps them)."""
        return all(w.by_pidfd for w in self.watches.values())

    def _unwatch(self, run_id: str) -> None:
        global _pidfds_held
        watch = self.watches.pop(run_id)
        _pidfds_held -= watch.by_pidfd
        watch.close()

    def close(self) -> None:
        for run_id in list(self.watches):
            self._unwatch(run_id)
        self.bell.close()


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


@contextlib.contextmanager
def guarding(root: StateRoot, owner: str) -> Iterator[None]:
    """A `Guard` on a thread of its own, for a host whose wait is not a poll() of ours
    (the MCP server's event loop). Entering returns once the runs already dead are folded
    (their follow-ups are in the inbox); leaving stops it after a fold in progress."""
    try:
        guard = Guard(root, owner)
    except (ActorsError, OSError) as exc:  # a bad owner id, a planted link: not guarded
        log(owner, getattr(exc, "message", None) or str(exc))
        yield
        return
    guard.scan()
    stop_read, stop_write = os.pipe()

    def serve() -> None:
        poller_fds: list[int] = []
        while True:
            poller = select.poll()
            poller_fds = [stop_read, *guard.fds()]
            for fd in poller_fds:
                poller.register(fd, select.POLLIN)
            ready = [fd for fd, _ in poller.poll()]
            if stop_read in ready:
                return
            for fd in ready:
                try:
                    guard.handle(fd)
                except Exception as exc:  # never into the host
                    log(owner, f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=serve, name=f"actors-guardian-{owner}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        os.write(stop_write, b"x")
        thread.join()
        guard.close()
        os.close(stop_read)
        os.close(stop_write)

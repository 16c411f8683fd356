"""Guardians: the long-lived processes a session already has fold its crashed runs.

A runner killed with SIGKILL writes no result and sends no follow-up, and the command it
left behind keeps running. No daemon watches for that: `actors inbox wait`, `actors mcp`
and the runner of a run with children each run `watch_session_runs` for the owner whose
follow-ups they wait for (a session, or `run:<id>` for the runs a run spawned), and fold
a dead runner's run (runtime.runs.reconcile.fold_run: orphans stopped, `exited`
published, one follow-up) as soon as it dies.

Nothing here polls. Each watched runner has a pidfd, and the guardian sleeps on it
(trio.lowlevel.wait_readable) until the process exits. A runner is watched only once its
recorded identity (pid, start ticks, boot id, argv) is verified *after* its pidfd was
opened: the pidfd then pins that very process, so a pid reused later can never be taken
for the runner, alive or dead. New runs are found through a doorbell: every runner rings
its owner's `guardians/` FIFOs once its identity is recorded, and the guardian then
scans the owner's runs again. A guardian that starts after a crash folds it in its first
scan. Several guardians of one session race harmlessly: `fold_run` works under the run's
fold lock, so exactly one follow-up is submitted.

What stays for `actors reconcile`: a run whose runner's identity cannot be verified (no
identity was ever recorded). Without a pidfd (a platform without them, or a process
whose guardians already hold a quarter of its descriptor limit) a slow timer stands in.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import trio

from runtime.core.errors import ActorsError, resource_error
from runtime.core.process import pidfd_open, verify
from runtime.messaging.doorbells import doorbell
from runtime.runs.guard_plan import WATCH as _WATCH, fold as _fold, log as _log, plan as _plan
from runtime.runs.launch import guardian_bells
from runtime.store.layout import StateRoot

NO_PIDFD_RECHECK_S = 2.0
"""Only without a pidfd (a platform without them, or past the budget below): how often
a watched runner is verified again."""
PIDFD_SHARE = 4
"""The guardians of a process hold at most 1/PIDFD_SHARE of its descriptor limit in
pidfds, so a session with thousands of live runs never starves the server they run in."""

_pidfds_held = 0


def pidfd_budget() -> int:
    """How many pidfds the watchers of one process may hold (1/PIDFD_SHARE of its
    descriptor limit)."""
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 16 if soft == resource.RLIM_INFINITY else max(16, soft // PIDFD_SHARE)


async def until_gone(identity: dict[str, Any], *, poll: bool = True) -> bool:
    """Return once the process `identity` names is no longer that process (True).

    Without a pidfd to sleep on (past the budget, no descriptor left, a platform without
    them) a guardian re-verifies every NO_PIDFD_RECHECK_S; with `poll=False` (the
    dashboard's hub, which promises not to wake while nothing happens) it returns False
    at once instead when the process is still alive: the caller follows it later."""
    global _pidfds_held
    fd = None
    if hasattr(os, "pidfd_open") and _pidfds_held < pidfd_budget():
        fd = pidfd_open(identity["pid"])
    if fd is None:
        if not poll:
            return verify(identity)[0] != "valid"
        while verify(identity)[0] == "valid":  # no pidfd to sleep on, or already gone
            await trio.sleep(NO_PIDFD_RECHECK_S)
        return True
    _pidfds_held += 1
    try:
        # verified after the pidfd was opened: the fd pins the runner itself, not a
        # process that took its pid since
        if verify(identity)[0] == "valid":
            await trio.lowlevel.wait_readable(fd)
    finally:
        _pidfds_held -= 1
        os.close(fd)
    return True


async def _guard_run(
    root: StateRoot, owner: str, run_id: str, identity: dict[str, Any] | None, busy: set[str]
) -> None:
    try:
        if identity is not None:
            await until_gone(identity)
        # not cancellable: a fold cut in half would leave frozen orphans behind
        await trio.to_thread.run_sync(_fold, root, owner, run_id)
    except Exception as exc:  # never into the host's nursery (trio.Cancelled is not one)
        _log(owner, f"run {run_id}: {type(exc).__name__}: {exc}")
    finally:
        busy.discard(run_id)


async def _scan(
    root: StateRoot,
    owner: str,
    busy: set[str],
    nursery: trio.Nursery,
    *,
    settle: bool = False,
    fail_fast: bool = False,
) -> None:
    """Plan the owner's runs again and start a task per new one. With `settle` (the first
    scan), the runs already dead are folded before it returns, so a command that starts
    guarding sees their follow-ups when it first looks. With `fail_fast`, a scan the
    machine cannot make (no descriptor left) raises instead of being logged."""
    try:
        plans = await trio.to_thread.run_sync(_plan, root, owner, frozenset(busy))
    except Exception as exc:  # an untrusted runs/ directory, say: the next ring retries
        if fail_fast and resource_error(exc) is not None:
            raise
        _log(owner, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
        return
    async with trio.open_nursery() as folds:
        for run_id, action, identity in plans:
            busy.add(run_id)
            watched = identity if action == _WATCH else None
            where = folds if settle and watched is None else nursery
            where.start_soon(_guard_run, root, owner, run_id, watched, busy)


async def watch_session_runs(
    root: StateRoot,
    session: str,
    *,
    scan_first: bool = True,
    fail_fast: bool = False,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Fold every run of `session` (an owner id: a session, `user:<login>` or `run:<id>`)
    whose runner dies, until cancelled. Started (task_status) once the first scan has
    folded the runs already dead and watches the live ones. A problem is logged on
    stderr, never raised into the host, except with `fail_fast` (a command that can end
    with the one line instead: `inbox wait`) when the machine cannot even start it (no
    descriptor left, a read-only root). A runner guarding its own children passes
    `scan_first=False`: none can exist before it."""
    started = False
    try:
        with doorbell(guardian_bells(root, session)) as bell:  # armed before the scan
            busy: set[str] = set()
            async with trio.open_nursery() as nursery:
                if scan_first:
                    await _scan(root, session, busy, nursery, settle=True, fail_fast=fail_fast)
                task_status.started()
                started = True
                while True:
                    await trio.lowlevel.wait_readable(bell)
                    with contextlib.suppress(BlockingIOError):
                        os.read(bell, 65536)
                    await _scan(root, session, busy, nursery)
    except (ActorsError, OSError) as exc:  # a bad owner id, a planted link: not guarded
        if fail_fast and not started and resource_error(exc) is not None:
            raise
        _log(session, getattr(exc, "message", None) or str(exc))
        with contextlib.suppress(RuntimeError):  # already started: nothing to report
            task_status.started()


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


@contextlib.contextmanager
def guarding(root: StateRoot, session: str) -> Iterator[None]:
    """`watch_session_runs` on a thread of its own, for a synchronous command (`actors
    inbox wait`): it sleeps in its own event loop while the command sleeps on its
    doorbell. Entering returns once the runs already dead are folded (their follow-ups
    are in the inbox), or raises the environment error that kept it from starting (a
    ResourceError: the command's one line); leaving cancels it and waits for a fold in
    progress to end."""
    ready = threading.Event()
    handle: dict[str, Any] = {}

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            handle["scope"], handle["token"] = (
                nursery.cancel_scope,
                trio.lowlevel.current_trio_token(),
            )
            await nursery.start(partial(watch_session_runs, root, session, fail_fast=True))
            ready.set()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:
            where = str(root.path)
            found = [f for e in _leaves(exc) if (f := resource_error(e, where)) is not None]
            if found and not ready.is_set():  # it never started: the command says why
                handle["error"] = found[0]
            else:
                _log(session, f"{type(exc).__name__}: {exc}")
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="actors-guardian", daemon=True)
    thread.start()
    ready.wait()
    if handle.get("error") is not None:
        thread.join()
        raise handle["error"]
    try:
        yield
    finally:
        if "scope" in handle and thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(handle["scope"].cancel, trio_token=handle["token"])
        thread.join()

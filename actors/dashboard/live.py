"""Live updates: file events under the state root -> the run board -> every open page.

The file events `actors watch` follows, under `runs/` and `sessions/`: a runner writing
run.json, progress.json, events.jsonl, its logs, a room message or result.json, a
session's deliveries.jsonl (actors.dashboard.watch). Each batch names the runs it
touched; the board re-derives only those, and every subscriber (one per open page,
reading `/events`) gets one server-sent event saying which runs changed, which were only
touched (their logs grew), and whether a session did. A runner killed outright writes
nothing: each active run's runner is followed on its pidfd too, up to a budget (a
quarter of the descriptor limit); past it a run waits, asleep, for a followed runner to
end. Nothing polls: the server sleeps on the inotify descriptor and the pidfds in its
event loop, the pages on their event stream. A batch the machine cannot serve (no
descriptor or memory left) is said once on stderr and read again at the next event;
the server keeps serving.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

from actors.dashboard.asgi import Request, send_event, start_stream
from actors.dashboard.watch import Batch, StateWatch
from runtime.core.errors import ActorsError, resource_error
from runtime.core.inotify import Inotify
from runtime.core.process import verify
from runtime.runner.guardian import pidfd_budget
from runtime.store.layout import StateRoot
from runtime.store.writes import ensure_dir
from runtime.views.board import RunBoard
from runtime.views.status import ACTIVE, find_run, runner_identity

GATHER_S = 0.02
"""After the first event of a burst, how long more events gather into the same batch."""
QUEUE = 64
"""Events a slow page may fall behind by; past that it is told to reload what it shows."""


class Hub:
    """The board, the watcher that keeps it fresh, and the pages listening."""

    def __init__(self, root: StateRoot) -> None:
        self.root = root
        self.board = RunBoard(root)
        self._subscribers: set[trio.MemorySendChannel[dict[str, Any]]] = set()
        self._followed: set[str] = set()
        self._slots = trio.CapacityLimiter(pidfd_budget())
        """Runners followed on a pidfd at once; past that a run waits, asleep, for a
        slot (a followed runner ending frees one): no timer ever stands in."""
        self._unfollowed: set[str] = set()
        """Active runs whose runner could not get a pidfd (no descriptor left): tried
        again when a followed runner ends or any file event comes."""
        self._nursery: trio.Nursery | None = None
        self._trouble: str | None = None

    def stop(self) -> None:
        """End every page's stream (a stopping server does not wait on open pages)."""
        for channel in list(self._subscribers):
            channel.close()
        self._subscribers.clear()

    async def watch(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Watch, then list: a run created in between is in the listing or in an event.
        Started (task_status) once the watches are in place and the board is loaded;
        cancelled to stop (it sleeps in the event loop, not in a thread)."""
        for place in (self.root.runs, self.root.sessions):
            ensure_dir(place)
        with Inotify() as inotify:
            tree = StateWatch(inotify, str(self.root.runs), str(self.root.sessions))
            tree.start()
            self.board.load()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._follow_runners(nursery, {r["run"] for r in self.board.runs()})
                task_status.started()
                while True:
                    await trio.lowlevel.wait_readable(inotify.fd)
                    await trio.sleep(GATHER_S)  # one batch for a burst of writes
                    try:
                        self._apply(nursery, tree, tree.apply(inotify.read()))
                    except (ActorsError, OSError, MemoryError) as exc:
                        self._note(exc)  # keep serving: the next event tries again
                    else:
                        self._trouble = None

    def _apply(self, nursery: trio.Nursery, tree: StateWatch, batch: Batch) -> None:
        if batch.overflow:  # events were lost: list and watch everything again
            tree.start()
            try:
                self.board.load()
            except ActorsError as exc:  # an untrusted directory: keep the board
                sys.stderr.write(f"actors dashboard: not re-listed: {exc.message}\n")
            self.publish({"version": self.board.version, "reload": True})
            self._follow_runners(nursery, {r["run"] for r in self.board.runs()})
        elif batch.touched or batch.sessions or self.board.behind or self._unfollowed:
            self._refresh(batch.touched, sessions=batch.sessions)
            self._follow_runners(nursery, batch.touched)

    def _note(self, exc: BaseException) -> None:
        """A batch the machine could not serve (no descriptor or memory left): one line
        on stderr per kind of trouble, never an exit; anything else is a bug."""
        found = exc if isinstance(exc, ActorsError) else resource_error(exc)
        if found is None:
            raise exc
        line = str(found)
        if line != self._trouble:
            self._trouble = line
            sys.stderr.write(f"actors dashboard: {line} (still serving)\n")

    def _refresh(self, touched: set[str], *, sessions: bool = False) -> None:
        changed = self.board.refresh(touched)
        for name in touched & set(self.board.refused):
            sys.stderr.write(f"actors dashboard: left off: {self.board.refused.pop(name)}\n")
        self.publish(
            {
                "version": self.board.version,
                "changed": sorted(changed),
                "touched": sorted(touched),
                "sessions": sessions,
            }
        )

    def _follow_runners(self, nursery: trio.Nursery, names: set[str]) -> None:
        """Sleep on the runner of each active run (a pidfd, as the guardians do): a runner
        killed outright writes no file, and the page must still see the run end."""
        names, self._unfollowed = names | self._unfollowed, set()
        for name in names - self._followed:
            row = self.board.get(name)
            if row is not None and row.get("status") in ACTIVE:
                self._followed.add(name)
                nursery.start_soon(self._follow, name)

    async def _follow(self, name: str) -> None:
        ended = False
        try:
            async with self._slots:  # past the budget: asleep until a followed run ends
                identity = await trio.to_thread.run_sync(self._identity, name)
                if identity is None:
                    return  # no verified runner yet: its run.json write brings it back here
                if not await _until_gone(identity, str(self.root.run(name).liveness)):
                    self._unfollowed.add(name)  # no pidfd now: again at the next event
                    return
                ended = True
                self._refresh({name})
        finally:
            self._followed.discard(name)
            if ended and self._unfollowed and self._nursery is not None:
                self._follow_runners(self._nursery, set())

    def _identity(self, name: str) -> dict[str, Any] | None:
        try:
            paths, run = find_run(self.root, name)
            identity = runner_identity(paths, run)
        except (ActorsError, OSError):
            return None
        return identity if identity is not None and verify(identity)[0] == "valid" else None

    def publish(self, event: dict[str, Any]) -> None:
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(event)
            except trio.WouldBlock:  # a page too slow to keep up: tell it to reload
                channel.close()
                self._subscribers.discard(channel)
            except trio.BrokenResourceError:
                self._subscribers.discard(channel)

    async def stream(self, request: Request) -> None:
        """One page's `/events`: a `hello` with the board's version, then every change,
        until the page goes away or the server stops."""
        send, receive = trio.open_memory_channel[dict[str, Any]](QUEUE)
        self._subscribers.add(send)
        await start_stream(request.send)
        await send_event(request.send, "hello", {"version": self.board.version})
        async with trio.open_nursery() as nursery:

            async def gone() -> None:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(gone)
            try:
                async with receive:
                    async for event in receive:
                        await send_event(request.send, "change", event)
            finally:
                self._subscribers.discard(send)
            nursery.cancel_scope.cancel()


async def _until_gone(identity: dict[str, Any], liveness: str) -> bool:
    """Once the runner `identity` names has exited, True (its exit watch, opened before
    the identity is verified again, so it pins that very process); False at once when no
    watch can be opened now (no descriptor left) and it still runs: followed later."""
    from runtime.core.platform import ExitWatch

    watch = ExitWatch.open(identity["pid"], liveness)
    if watch is None:
        return verify(identity)[0] != "valid"
    try:
        if verify(identity)[0] == "valid":
            await trio.lowlevel.wait_readable(watch.fd)
    finally:
        watch.close()
    return True

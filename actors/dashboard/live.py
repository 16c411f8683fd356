"""Live updates: file events under the state root -> the run board -> every open page.

The same file events `actors watch` follows (watchfiles on `runs/`, here `sessions/`
too): a runner writing run.json, progress.json, events.jsonl, its logs, a room message
or result.json, a session's deliveries.jsonl. Each batch names the runs it touched; the
board re-derives only those, and every subscriber (one per open page, reading
`/events`) gets one server-sent event saying which runs changed, which were only
touched (their logs grew), and whether a session did. Neither the server nor a page polls
the state: pages wait on their event stream, the server on the watcher, which sleeps
until inotify reports a write (watchfiles' thread gathers a burst in STEP_MS steps).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import trio
from watchfiles._rust_notify import RustNotify  # awatch has no hook for 'watches are set'

from actors.dashboard.asgi import Request, send_event, start_stream
from runtime.core.errors import ActorsError
from runtime.core.process import verify
from runtime.runs.board import RunBoard
from runtime.runs.guardian import until_gone
from runtime.runs.status import ACTIVE, find_run, runner_identity
from runtime.store.layout import StateRoot
from runtime.store.writes import ensure_dir

DEBOUNCE_MS = 200
"""The longest a burst of file events gathers before the pages hear of it."""
STEP_MS = 20
"""A batch is sent once no new event came for this long (watchfiles' step)."""
QUEUE = 64
"""Events a slow page may fall behind by; past that it is told to reload what it shows."""


class Hub:
    """The board, the watcher that keeps it fresh, and the pages listening."""

    def __init__(self, root: StateRoot) -> None:
        self.root = root
        self.board = RunBoard(root)
        self._subscribers: set[trio.MemorySendChannel[dict[str, Any]]] = set()
        self._stop = threading.Event()
        self._followed: set[str] = set()

    def stop(self) -> None:
        """Wake the watcher thread so it returns (it is not abandoned mid-inotify), and
        end every page's stream (a stopping server does not wait on open pages)."""
        self._stop.set()
        for channel in list(self._subscribers):
            channel.close()
        self._subscribers.clear()

    async def watch(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Watch, then list: a run created in between is in the listing or in an event.
        Started (task_status) once the watches are in place and the board is loaded."""
        runs, sessions = Path(self.root.runs), Path(self.root.sessions)
        for place in (runs, sessions):
            ensure_dir(place)
        with RustNotify([str(runs), str(sessions)], False, False, 0, True, True) as watcher:
            self.board.load()
            async with trio.open_nursery() as nursery:
                self._follow_runners(nursery, {r["run"] for r in self.board.runs()})
                task_status.started()
                while True:
                    raw = await trio.to_thread.run_sync(
                        watcher.watch, DEBOUNCE_MS, STEP_MS, 0, self._stop
                    )
                    if raw == "stop" or not isinstance(raw, set):
                        nursery.cancel_scope.cancel()
                        return
                    touched, sessions_changed = self._batch(runs, sessions, raw)
                    if touched or sessions_changed:
                        self._refresh(touched, sessions=sessions_changed)
                        self._follow_runners(nursery, touched)

    @staticmethod
    def _batch(runs: Path, sessions: Path, raw: set[tuple[int, str]]) -> tuple[set[str], bool]:
        """The runs a batch of file events touched, and whether a session's files did."""
        touched: set[str] = set()
        session_changed = False
        for _change, path in raw:
            if path.endswith(".lock"):
                continue
            where = Path(path)
            if where.is_relative_to(runs) and where != runs:
                touched.add(where.relative_to(runs).parts[0])
            elif where.is_relative_to(sessions):
                session_changed = True
        return touched, session_changed

    def _refresh(self, touched: set[str], *, sessions: bool = False) -> None:
        changed = self.board.refresh(touched)
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
        for name in names - self._followed:
            row = self.board.get(name)
            if row is not None and row.get("status") in ACTIVE:
                self._followed.add(name)
                nursery.start_soon(self._follow, name)

    async def _follow(self, name: str) -> None:
        try:
            identity = await trio.to_thread.run_sync(self._identity, name)
            if identity is None:
                return  # no verified runner yet: its run.json write brings it back here
            await until_gone(identity)
            self._refresh({name})
        finally:
            self._followed.discard(name)

    def _identity(self, name: str) -> dict[str, Any] | None:
        try:
            paths, run = find_run(self.root, name)
            identity = runner_identity(paths, run)
        except ActorsError:
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

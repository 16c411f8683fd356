"""What a run waits for before its graph starts: the runs it comes `--after`, then a
slot of its group (`--group`). Until then the run is `queued`, and its runner sleeps
(parked, runtime.runner.park) on exit watches and the group's doorbell: nothing polls.

The dependencies come first: each must end `done`; one that ends any other way (failed,
cancelled, killed, exited, skipped) ends this run `skipped`, naming it. Only then does
the run join its group's queue (runtime.runner.slots), so a run whose dependency is
still running never holds a place a runnable one could take.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.core.errors import ActorsError, NotFound
from runtime.core.platform import ExitWatch
from runtime.runner.slots import Slot, Waiter
from runtime.store.layout import StateRoot
from runtime.views.status import TERMINAL, derive, find_run, runner_identity

STARTING_RECHECK_S = 0.25
"""A dependency whose runner has not recorded its identity yet (the first instants of
its life) has nothing to watch; it is looked at again after this long."""


def expected_wait(root: StateRoot, run: dict[str, Any]) -> str | None:
    """What a run just spawned will wait for, as its spawn reports it ("run X", "a slot
    of group G (n ahead)"), or None when it should start at once. A forecast: the runner
    decides, a moment later."""
    pending = []
    for dep in run.get("after") or []:
        try:
            status = derive(*find_run(root, dep))["status"]
        except NotFound:
            continue
        if status not in TERMINAL:
            pending.append(dep)
    if pending:
        return "run " + ", ".join(pending)
    group = run.get("group")
    if not group:
        return None
    from runtime.runner.slots import holders, limit, queued

    paths = root.group(group)
    try:
        waiting, held, parallel = len(queued(paths)), len(holders(paths)), limit(paths)
    except NotFound:
        return None
    if waiting == 0 and held < parallel:
        return None
    return f"a slot of group {group}" + (f" ({waiting} ahead)" if waiting else "")


class Gate:
    """A run's wait before its graph: dependencies, then a group slot."""

    def __init__(self, root: StateRoot, run: dict[str, Any]) -> None:
        self.root = root
        self.run_id: str = run["run"]
        after, group, order = run.get("after"), run.get("group"), run.get("queue_order")
        self.after: list[str] = (
            [a for a in after if isinstance(a, str)] if isinstance(after, list) else []
        )
        self.group: str | None = group if isinstance(group, str) else None
        self.order: str = order if isinstance(order, str) else run["run_instance_id"]
        self.waiter: Waiter | None = None
        self.slot: Slot | None = None
        self.watches: dict[str, ExitWatch] = {}
        self.recheck_at: float | None = None
        self.skipped: str | None = None
        """Why the run will not start (a dependency did not end `done`)."""
        self.opened = False

    @staticmethod
    def needed(run: dict[str, Any]) -> bool:
        return bool(run.get("after") or run.get("group"))

    def waiting_for(self) -> str:
        """What the run waits for, in words (progress.json's `waiting_for`)."""
        if self.after:
            return "run " + ", ".join(self.after)
        if self.waiter is not None:
            ahead = self.waiter.ahead()
            return f"a slot of group {self.group}" + (f" ({ahead} ahead)" if ahead else "")
        return "its start"

    # --- looking ----------------------------------------------------------------------

    def look(self) -> None:
        """Go as far as the state allows now: past the ended dependencies, into the
        group's queue, into a slot."""
        if self.opened or self.skipped is not None:
            return
        self.recheck_at = None
        if self.after:
            self._look_after()
            if self.after or self.skipped is not None:
                return
        if self.group is not None and self.slot is None:
            try:
                if self.waiter is None:
                    self.waiter = Waiter.join(self.root, self.group, self.run_id, self.order)
                self.slot = self.waiter.take()
            except NotFound:  # `actors group rm --force` while it waited
                self.skipped = f"group {self.group} was removed"
                self.close()
                return
            except ActorsError as exc:  # its group.json damaged, a link planted in it
                self.skipped = f"group {self.group}: {exc.message}"
                self.close()
                return
            if self.slot is None:
                return
            self.waiter = None  # take() closed it
        self.opened = True

    def _look_after(self) -> None:
        for dep in list(self.after):
            try:
                paths, record = find_run(self.root, dep)
            except NotFound:
                self.skipped = f"run {dep} does not exist any more"
                return
            except ActorsError as exc:  # a bad id, a damaged run.json
                self.skipped = f"run {dep}: {exc.message}"
                return
            status = derive(paths, record)["status"]
            if status == "done":
                self.after.remove(dep)
                self._unwatch(dep)
            elif status in TERMINAL:
                self.skipped = f"run {dep} ended {status}"
                return
            elif dep not in self.watches:
                identity = runner_identity(paths, record)
                pid = identity.get("pid") if identity else None
                watch = (
                    None if not isinstance(pid, int) else ExitWatch.open(pid, str(paths.liveness))
                )
                if watch is None:
                    self.recheck_at = time.monotonic() + STARTING_RECHECK_S
                else:
                    self.watches[dep] = watch
                    if derive(paths, record)["status"] in TERMINAL:
                        self.recheck_at = time.monotonic()  # it ended as the watch opened

    def _unwatch(self, dep: str) -> None:
        watch = self.watches.pop(dep, None)
        if watch is not None:
            watch.close()

    # --- what the loop asks ---------------------------------------------------------

    def fds(self) -> list[int]:
        fds = [w.fd for w in self.watches.values()]
        return fds + (self.waiter.fds() if self.waiter is not None else [])

    def handle(self, fd: int) -> bool:
        """A ready descriptor of the gate's (then it looks again); False if not one."""
        for dep, watch in list(self.watches.items()):
            if watch.fd == fd:
                self._unwatch(dep)
                self.look()
                return True
        if self.waiter is not None and self.waiter.handle(fd):
            self.look()
            return True
        return False

    def deadline(self) -> float | None:
        return None if self.opened else self.recheck_at

    def tick(self, now: float) -> None:
        if self.recheck_at is not None and now >= self.recheck_at:
            self.look()

    def crosses_exec(self) -> bool:
        """Whether every watch survives a park (pidfds do; a portable watch's thread
        does not, so that runner stays up while it waits)."""
        watches = list(self.watches.values())
        return all(w.by_pidfd for w in watches) and (
            self.waiter is None or self.waiter.crosses_exec()
        )

    # --- across a park --------------------------------------------------------------

    def kept(self) -> list[int]:
        fds = [w.fd for w in self.watches.values()]
        fds += self.waiter.kept() if self.waiter is not None else []
        return fds + (self.slot.fds() if self.slot is not None else [])

    def snapshot(self) -> dict[str, Any]:
        return {
            "after": self.after,
            "watches": {dep: w.fd for dep, w in self.watches.items()},
            "waiter": None if self.waiter is None else self.waiter.snapshot(),
            "slot": None if self.slot is None else self.slot.snapshot(),
            "skipped": self.skipped,
            "opened": self.opened,
        }

    @classmethod
    def restore(cls, root: StateRoot, run: dict[str, Any], saved: dict[str, Any]) -> Gate:
        gate = cls(root, run)
        gate.after = list(saved["after"])
        gate.watches = {dep: ExitWatch(fd) for dep, fd in saved["watches"].items()}
        if saved["waiter"] is not None:
            gate.waiter = Waiter.adopt(root, saved["waiter"])
        if saved["slot"] is not None:
            gate.slot = Slot.adopt(root, saved["slot"])
        gate.skipped, gate.opened = saved["skipped"], saved["opened"]
        return gate

    # --- the end ----------------------------------------------------------------------

    def close(self) -> None:
        """Leave the queue and drop the watches (the slot is kept: `release`)."""
        for dep in list(self.watches):
            self._unwatch(dep)
        if self.waiter is not None:
            self.waiter.close()
            self.waiter = None

    def release(self) -> None:
        """The run has ended and its processes are gone: its slot goes to the next."""
        self.close()
        if self.slot is not None:
            self.slot.release()
            self.slot = None

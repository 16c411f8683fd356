"""Named groups with a parallel limit, kept without a daemon: a slot is a flock that a
live process holds, and the kernel frees it when that process dies.

A group lives in `groups/<name>/`: `group.json` ({"parallel": N}), `slot-<i>.lock` for
each of the N slots (a holder takes an exclusive, non-blocking flock on one and keeps the
descriptor for its life), `slot-<i>.holder` (the holder's process identity, so a waiter
can watch for its exit), `queue/` (one entry per waiter, named by a time-ordered id:
first come, first served) and `doorbells/` (rung when a slot is given back, the queue's
head leaves or the limit changes).

A waiter (`Waiter`) takes a slot only when it is the first live entry of the queue; until
then it sleeps on the group's doorbell and on the exit watches of the slot holders and of
the waiters ahead of it (runtime.core.platform.ExitWatch). A holder that ends normally
gives its slot back and rings; one that dies (SIGKILL) loses its flock to the kernel and
its watchers wake on its exit. Nothing polls, and a waiter that dies is skipped (its
identity no longer verifies). Its users: a run spawned into a group (its runner waits
here before its graph starts, runtime.runner.gate) and `actors group run NAME -- CMD`
(a swarm's agents take their turns this way).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Any

from runtime.core.errors import BadInput, Conflict, NotFound, StateDamaged
from runtime.core.ids import new_id, now_iso
from runtime.core.platform import ExitWatch
from runtime.core.process import capture, verify
from runtime.messaging.doorbells import Bell, ring
from runtime.store import safe
from runtime.store.layout import GroupPaths, StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_json_atomic

MAX_PARALLEL = 1024


def set_limit(root: StateRoot, name: str, parallel: int) -> GroupPaths:
    """Create the group or change its limit; its waiters look again at once."""
    if not 1 <= parallel <= MAX_PARALLEL:
        raise BadInput(
            f"--parallel {parallel} is outside 1-{MAX_PARALLEL}", hint="e.g. --parallel 4"
        )
    paths = root.group(name)
    ensure_dir(paths.queue)
    ensure_dir(paths.doorbells)
    write_json_atomic(paths.record, {"parallel": parallel, "updated_at": now_iso()})
    ring(paths.doorbells)
    return paths


def limit(paths: GroupPaths) -> int:
    """The group's parallel limit; NotFound for a group never set."""
    try:
        record = read_json(paths.record)
    except StateDamaged:
        record = None
    parallel = record.get("parallel") if isinstance(record, dict) else None
    if record is None and not safe_exists(paths.record):
        raise NotFound(
            f"no group {paths.name}",
            hint=f"create it with `actors group set {paths.name} --parallel N`",
        )
    if not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1:
        raise StateDamaged(f"group {paths.name}: group.json is damaged", path=paths.record)
    return min(parallel, MAX_PARALLEL)


def names(root: StateRoot) -> list[str]:
    """Every group set in this state root."""
    try:
        with safe.scandir(root.groups) as (_, entries):
            return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []


def describe(paths: GroupPaths) -> dict[str, Any]:
    """A group as `actors group ls` shows it: its limit, who holds its slots and who
    waits, first come first."""
    held = holders(paths)
    return {
        "group": paths.name,
        "parallel": limit(paths),
        "running": [held[i].get("label") for i in sorted(held)],
        "queued": [record.get("label") for _, record in queued(paths)],
    }


def remove(root: StateRoot, name: str, *, force: bool = False) -> None:
    """Forget a group. Refused while it has members (a run waiting for it would end
    `skipped`), unless forced."""
    paths = root.group(name)
    view = describe(paths)
    if (view["running"] or view["queued"]) and not force:
        raise Conflict(
            f"group {name} has {len(view['running'])} running and {len(view['queued'])} queued",
            hint="wait for them, or pass --force (its queued runs then end skipped)",
        )
    import shutil

    trash = root.tmp / f"group-{name}-{new_id()}"
    ensure_dir(root.tmp)
    safe.rename(paths.dir, trash)
    ring(trash / "doorbells")  # its waiters look again and find it gone
    shutil.rmtree(trash, ignore_errors=True)


def safe_exists(path: Any) -> bool:
    try:
        safe.lstat(path)
    except (OSError, StateDamaged):
        return False
    return True


def _alive(record: Any) -> dict[str, Any] | None:
    """The process identity a holder or queue record names, when that process is alive
    now. Its start time and boot pin it; its argv is not compared (a holder may exec
    its command, runtime.runner.gate)."""
    identity = record.get("identity") if isinstance(record, dict) else None
    if not isinstance(identity, dict):
        return None
    pinned = {k: v for k, v in identity.items() if k not in ("argv", "cwd")}
    return identity if verify(pinned)[0] == "valid" else None


def holders(paths: GroupPaths) -> dict[int, dict[str, Any]]:
    """Slot -> the holder record of each slot held by a live process now."""
    found = {}
    for index in range(limit(paths)):
        try:
            record = read_json(paths.holder(index))
        except (StateDamaged, OSError):
            continue
        if _alive(record) is not None:
            found[index] = record
    return found


def queued(paths: GroupPaths) -> list[tuple[str, dict[str, Any]]]:
    """The live waiters, first come first: (entry name, its record). An entry whose
    waiter is gone is removed on the way (it can never take a slot)."""
    try:
        with safe.scandir(paths.queue) as (_, entries):
            names = sorted(e.name for e in entries if e.name.endswith(".json"))
    except (OSError, StateDamaged):
        return []
    live = []
    for name in names:
        entry = paths.queue / name
        try:
            record = read_json(entry)
        except (StateDamaged, OSError):
            record = None
        if _alive(record) is not None:
            live.append((name, record))
        else:
            with contextlib.suppress(OSError, StateDamaged):
                safe.unlink(entry)
    return live


class Slot:
    """A slot held: its flock, for as long as the descriptor is open (and the flock on
    its `.live` file, which watchers without a pidfd wait on)."""

    __slots__ = ("fd", "index", "live", "paths")

    def __init__(self, paths: GroupPaths, index: int, fd: int, live: int) -> None:
        self.paths, self.index, self.fd, self.live = paths, index, fd, live

    def snapshot(self) -> list[Any]:
        return [self.paths.name, self.index, self.fd, self.live]

    @classmethod
    def adopt(cls, root: StateRoot, saved: list[Any]) -> Slot:
        name, index, fd, live = saved
        return cls(root.group(name), index, fd, live)

    def fds(self) -> list[int]:
        return [fd for fd in (self.fd, self.live) if fd >= 0]

    def release(self) -> None:
        """Give the slot back (the next waiter is rung). A holder that dies without this
        loses the flock anyway, and its watchers wake on its exit."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError, StateDamaged):
            safe.unlink(self.paths.holder(self.index))
        for fd in self.fds():
            os.close(fd)
        self.fd = self.live = -1
        with contextlib.suppress(OSError, StateDamaged):
            ring(self.paths.doorbells)


class Waiter:
    """One process's place in a group's queue, until it holds a slot (`take`).

    Only the queue's head competes for a slot and watches the holders' exits; every
    other waiter watches the one just ahead of it (its exit). All of them sleep on the
    group's doorbell, rung when a slot is given back or the queue's head changes."""

    def __init__(
        self, paths: GroupPaths, label: str, entry: str, bell: Bell, alive: int
    ) -> None:
        self.paths, self.label, self.entry, self.bell, self.alive = (
            paths, label, entry, bell, alive
        )
        self.identity = capture(os.getpid()) or {"pid": os.getpid()}
        self.watches: dict[int, ExitWatch] = {}

    @classmethod
    def join(cls, root: StateRoot, name: str, label: str, order: str | None = None) -> Waiter:
        """Enter group `name`'s queue; `order` (a time-ordered id, by default now) is the
        place: the earliest order goes first. NotFound for a group never set."""
        paths = root.group(name)
        limit(paths)  # a group never set is refused before anything is written
        entry = f"{order or new_id()}.{os.getpid()}.json"
        ensure_dir(paths.queue)
        identity = capture(os.getpid()) or {"pid": os.getpid()}
        write_json_atomic(
            paths.queue / entry, {"label": label, "identity": identity, "queued_at": now_iso()}
        )
        fd = safe.open_file(paths.queue / entry, os.O_RDONLY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)  # ours alone: it was made a moment ago
        """An exclusive flock on the entry for as long as this waiter waits: a watcher
        without a pidfd learns of its death when a shared lock on it is granted."""
        waiter = cls(paths, label, entry, Bell.open(paths.doorbells), fd)
        ring(paths.doorbells)  # a new face: the one behind it (if any) looks again
        return waiter

    def snapshot(self) -> dict[str, Any]:
        """What a parked runner keeps of its place (runtime.runner.park)."""
        bell = self.bell
        return {
            "group": self.paths.name,
            "label": self.label,
            "entry": self.entry,
            "bell": [bell.read, bell.write, str(bell.path)],
            "alive": self.alive,
            "watches": {str(pid): w.fd for pid, w in self.watches.items()},
        }

    @classmethod
    def adopt(cls, root: StateRoot, saved: dict[str, Any]) -> Waiter:
        from pathlib import Path

        read, write, path = saved["bell"]
        waiter = cls(
            root.group(saved["group"]),
            saved["label"],
            saved["entry"],
            Bell(read, write, Path(path)),
            saved["alive"],
        )
        waiter.watches = {int(pid): ExitWatch(fd) for pid, fd in saved["watches"].items()}
        return waiter

    def kept(self) -> list[int]:
        """The descriptors a parked runner must inherit."""
        return [self.bell.read, self.bell.write, self.alive, *self.fds()[1:]]

    def ahead(self) -> int:
        """How many live waiters are ahead of this one (0: next)."""
        names = [name for name, _ in queued(self.paths)]
        return names.index(self.entry) if self.entry in names else 0

    def take(self) -> Slot | None:
        """The slot, when this waiter is first in the queue and one is free; else None,
        having armed the exit watches it must wake on."""
        live = queued(self.paths)
        names = [name for name, _ in live]
        place = names.index(self.entry) if self.entry in names else 0
        if place == 0:
            slot = self._try_slots()
            if slot is not None:
                self.close()
                return slot
            held = holders(self.paths)
            watched = [(r, str(self.paths.live(i))) for i, r in held.items()]
            expected = limit(self.paths)
        else:
            name, record = live[place - 1]
            watched, expected = [(record, str(self.paths.queue / name))], 1
        if self._watch(watched) < expected:
            self._look_again()  # one ended between the look and its watch
        return None

    def _look_again(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self.bell.write, b"x")

    def _try_slots(self) -> Slot | None:
        for index in range(limit(self.paths)):
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
            fd = safe.open_file(self.paths.slot(index), flags)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            live = safe.open_file(self.paths.live(index), flags)
            fcntl.flock(live, fcntl.LOCK_EX)  # a watcher's shared lock lasts an instant
            write_json_atomic(
                self.paths.holder(index),
                {"label": self.label, "identity": self.identity, "since": now_iso()},
            )
            with contextlib.suppress(OSError, StateDamaged):
                safe.unlink(self.paths.queue / self.entry)
            ring(self.paths.doorbells)  # the queue's head left: the next one looks
            return Slot(self.paths, index, fd, live)
        return None

    def _watch(self, records: list[tuple[dict[str, Any], str]]) -> int:
        """Exit watches on the processes that must end (or leave) before this waiter's
        turn: each a pidfd, its process proven after it is opened (so the pidfd pins
        that process), or on the portable path a shared lock on what the process holds
        exclusively for its life (its slot's `.live` file, or its queue entry)."""
        wanted: dict[int, tuple[dict[str, Any], str]] = {}
        for record, liveness in records:
            identity = _alive(record)
            if identity is not None and identity.get("pid") != os.getpid():
                wanted[int(identity["pid"])] = (record, liveness)
        for pid in list(self.watches):
            if pid not in wanted:
                self.watches.pop(pid).close()
        for pid, (record, liveness) in wanted.items():
            if pid in self.watches:
                continue
            watch = ExitWatch.open(pid, liveness)
            if watch is None:
                continue  # gone already: the next look sees its slot or entry free
            if _alive(record) is not None:
                self.watches[pid] = watch
            else:
                watch.close()
        return len(self.watches)

    def fds(self) -> list[int]:
        return [self.bell.read, *(w.fd for w in self.watches.values())]

    def handle(self, fd: int) -> bool:
        """A ready descriptor of this waiter's: take the ring, or drop the ended watch;
        False when it is not one of them. The caller then calls `take` again."""
        if fd == self.bell.read:
            self.bell.drain()
            return True
        for pid, watch in list(self.watches.items()):
            if watch.fd == fd:
                self.watches.pop(pid).close()
                return True
        return False

    def crosses_exec(self) -> bool:
        return all(w.by_pidfd for w in self.watches.values())

    def close(self) -> None:
        """Leave the queue (taken, or given up)."""
        for watch in self.watches.values():
            watch.close()
        self.watches.clear()
        with contextlib.suppress(OSError, StateDamaged):
            safe.unlink(self.paths.queue / self.entry)
        if self.alive >= 0:
            os.close(self.alive)
            self.alive = -1
        self.bell.close()
        with contextlib.suppress(OSError, StateDamaged):
            ring(self.paths.doorbells)  # the one behind looks again


def wait_for_slot(root: StateRoot, name: str, label: str) -> Slot:
    """Block until this process holds a slot of group `name` (`actors group run`)."""
    import select

    waiter = Waiter.join(root, name, label)
    try:
        while True:
            slot = waiter.take()
            if slot is not None:
                return slot
            poller = select.poll()
            for fd in waiter.fds():
                poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll():
                waiter.handle(fd)
    except BaseException:
        waiter.close()
        raise

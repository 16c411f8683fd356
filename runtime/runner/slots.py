"""Named groups with a parallel limit, kept without a daemon: a slot is a flock that a
live process holds, and the kernel frees it when that process dies.

A group lives in `groups/<name>/`: `group.json` ({"parallel": N}), `slot-<i>.lock` for
each of the N slots (a holder takes an exclusive, non-blocking flock on one and keeps the
descriptor for its life), `slot-<i>.live` (flocked by the holder too: what watchers wait
on), `slot-<i>.holder` (who holds it, for the views), `queue/` (one entry per waiter,
flocked by it while it waits, named by a time-ordered id: first come, first served) and
`doorbells/` (rung when a slot is given back, the queue's head changes or the limit does).

Who is alive is what the kernel says, never what a file says: a slot or queue entry
counts as held only while a process holds its flock, and a watcher waits on the process
/proc/locks names as the holder (a pidfd, proven after it is opened) or, on the portable
path, on the lock itself. A record planted in the group (a forged holder or queue entry
naming pid 1) neither blocks the queue nor misdirects a watch.

A waiter (`Waiter`) takes a slot only when it is the first live entry of the queue; until
then it sleeps on the group's doorbell and on one exit watch: the head on the slots'
holders, every other waiter on the one just ahead of it. A holder that ends gives its
slot back and rings; one that dies (SIGKILL) loses its flock to the kernel and its
watcher wakes on its exit. Nothing polls. Its users: a run spawned into a group (its
runner waits here before its graph starts, runtime.runner.gate) and `actors group run
NAME -- CMD` (a swarm's agents take their turns this way).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Any

from runtime.core.errors import ActorsError, BadInput, Conflict, NotFound, StateDamaged
from runtime.core.ids import new_id, now_iso
from runtime.core.platform import ExitWatch, locked, watch_lock
from runtime.messaging.doorbells import Bell, ring
from runtime.store import safe
from runtime.store.layout import GroupPaths, StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import dump_json, ensure_dir, write_all, write_json_atomic

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
        "running": [held[i] for i in sorted(held)],
        "queued": [label for _, label in queued(paths)],
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


def _open_lockable(path: Path) -> int | None:
    """A group file opened to test or watch its lock (never through a link), or None."""
    try:  # O_NONBLOCK: a FIFO planted there must not hang the open
        return safe.open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ActorsError):
        return None


def _held(path: Path) -> bool:
    """Whether a live process holds this slot's or queue entry's flock now."""
    fd = _open_lockable(path)
    if fd is None:
        return False
    try:
        return locked(fd)
    finally:
        os.close(fd)


def _label(path: Path) -> str:
    """What a holder or queue record calls its process (shown, never trusted)."""
    try:
        record = read_json(path, max_bytes=64 * 1024)
    except (StateDamaged, OSError):
        return "?"
    label = record.get("label") if isinstance(record, dict) else None
    return label if isinstance(label, str) else "?"


def holders(paths: GroupPaths) -> dict[int, str]:
    """Slot -> the label of its holder, for each slot a live process holds now."""
    return {
        index: _label(paths.holder(index))
        for index in range(limit(paths))
        if _held(paths.live(index))
    }


def queued(paths: GroupPaths) -> list[tuple[str, str]]:
    """The live waiters, first come first: (entry name, its label). An entry no process
    holds any more (its waiter died, or it was never one) is removed on the way."""
    try:
        with safe.scandir(paths.queue) as (_, entries):
            names = sorted(e.name for e in entries if e.name.endswith(".json"))
    except (OSError, StateDamaged):
        return []
    live = []
    for name in names:
        entry = paths.queue / name
        if _held(entry):
            live.append((name, _label(entry)))
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
    other waiter watches the one just ahead of it. All of them sleep on the group's
    doorbell, rung when a slot is given back or the queue's head changes."""

    def __init__(self, paths: GroupPaths, label: str, entry: str, bell: Bell, alive: int) -> None:
        self.paths, self.label, self.entry = paths, label, entry
        self.bell = bell
        self.alive = alive
        """The entry's descriptor, flocked exclusively while this waiter waits: the
        entry is live exactly as long as this process is."""
        self.watches: dict[str, ExitWatch] = {}
        """Watched file (a slot's `.live`, the entry ahead) -> the exit watch on its holder."""

    @classmethod
    def join(cls, root: StateRoot, name: str, label: str, order: str | None = None) -> Waiter:
        """Enter group `name`'s queue; `order` (a time-ordered id, by default now) is the
        place: the earliest order goes first. NotFound for a group never set. The entry
        is flocked before it is renamed into the queue, so no one ever sees it unheld."""
        paths = root.group(name)
        limit(paths)  # a group never set is refused before anything is written
        ensure_dir(paths.queue)
        entry = f"{order or new_id()}.{os.getpid()}.json"
        staged = paths.queue / f".{entry}.tmp"
        fd = safe.open_file(staged, os.O_RDWR | os.O_CREAT | os.O_EXCL)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            record = {"label": label, "pid": os.getpid(), "queued_at": now_iso()}
            write_all(fd, dump_json(record), staged)
            safe.rename(staged, paths.queue / entry)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError, ActorsError):
                safe.unlink(staged)
            raise
        waiter = cls(paths, label, entry, Bell.open(paths.doorbells), fd)
        ring(paths.doorbells)  # a new face: the queue looks again
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
            "watches": {path: w.fd for path, w in self.watches.items()},
        }

    @classmethod
    def adopt(cls, root: StateRoot, saved: dict[str, Any]) -> Waiter:
        read, write, path = saved["bell"]
        bell = Bell(read, write, Path(path))
        group = root.group(saved["group"])
        waiter = cls(group, saved["label"], saved["entry"], bell, saved["alive"])
        waiter.watches = {path: ExitWatch(fd) for path, fd in saved["watches"].items()}
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
        names = [name for name, _ in queued(self.paths)]
        place = names.index(self.entry) if self.entry in names else 0
        if place == 0:
            slot = self._try_slots()
            if slot is not None:
                self.close()
                return slot
            wanted = [self.paths.live(i) for i in range(limit(self.paths))]
        else:
            wanted = [self.paths.queue / names[place - 1]]
        if self._watch(wanted) < len(wanted):
            self._look_again()  # one ended between the look and its watch
        return None

    def _look_again(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self.bell.write, b"x")

    def _try_slots(self) -> Slot | None:
        for index in range(limit(self.paths)):
            flags = os.O_RDWR | os.O_CREAT
            fd = safe.open_file(self.paths.slot(index), flags)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                live = safe.open_file(self.paths.live(index), flags)
                fcntl.flock(live, fcntl.LOCK_EX)  # a watcher's probe lasts an instant
                record = {"label": self.label, "pid": os.getpid(), "since": now_iso()}
                write_json_atomic(self.paths.holder(index), record)
            except BaseException:
                os.close(fd)
                raise
            with contextlib.suppress(OSError, StateDamaged):
                safe.unlink(self.paths.queue / self.entry)
            ring(self.paths.doorbells)  # the queue's head left: the next one looks
            return Slot(self.paths, index, fd, live)
        return None

    def _watch(self, wanted: list[Path]) -> int:
        """An exit watch on the holder of each file in `wanted` (runtime.core.platform
        `watch_lock`: the kernel names the holder); how many are held and watched."""
        keys = {str(path) for path in wanted}
        for key in list(self.watches):
            if key not in keys:
                self.watches.pop(key).close()
        for path in wanted:
            key = str(path)
            if key in self.watches:
                continue
            fd = _open_lockable(path)
            if fd is None:
                continue
            try:
                watch = watch_lock(fd)
            finally:
                os.close(fd)
            if watch is not None:
                self.watches[key] = watch
        return len(self.watches)

    def fds(self) -> list[int]:
        return [self.bell.read, *(w.fd for w in self.watches.values())]

    def handle(self, fd: int) -> bool:
        """A ready descriptor of this waiter's: take the ring, or drop the ended watch;
        False when it is not one of them. The caller then calls `take` again."""
        if fd == self.bell.read:
            self.bell.drain()
            return True
        for key, watch in list(self.watches.items()):
            if watch.fd == fd:
                self.watches.pop(key).close()
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
        with contextlib.suppress(OSError, ActorsError):
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

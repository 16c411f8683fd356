"""Doorbells: waking a mailbox's consumers without carrying any data.

A consumer sleeps on a private FIFO in the box's `doorbells/` directory; a sender writes
one byte into every FIFO that wants the message's type. No timer backs them up: a sender
rings inside the critical section of its append, before writing, and consumers read
under the same lock (`durable_inbox.DurableInbox.append_ringing`), so no kill point
loses a wake; a full FIFO already holds a pending wake, so coalesced rings lose nothing
either. Its own
module because rooms, the runner and the delivery watcher ring and listen without any
inbox of their own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from runtime.core.errors import ActorsError
from runtime.core.process import read_stat
from runtime.store import safe
from runtime.store.writes import ensure_dir


def _bell_topic(name: str) -> str | None:
    """`<pid>-<hex>.fifo` rings for everything; `<pid>-<hex>.<topic>.fifo` only for types
    under `<topic>.` (the runner listens on `control`, so data messages never wake it)."""
    parts = name.split(".")
    return parts[1] if len(parts) == 3 else None


def wants(name: str, kind: str | None) -> bool:
    topic = _bell_topic(name)
    return topic is None or kind is None or kind.startswith(topic + ".")


_BELL_FLAGS = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def open_bell(path: Path, directory: int | None = None) -> int | None:
    """A consumer's FIFO open for writing, or None. Never through a planted symlink, and
    never a regular file (a byte written there would land outside the doorbell's purpose).
    With `directory` (a descriptor of its doorbells/), `path`'s name is opened there."""
    try:
        if directory is None:
            fd = safe.open_file(path, _BELL_FLAGS)
        else:
            fd = os.open(path.name, _BELL_FLAGS, dir_fd=directory)
    except ActorsError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def ring(doorbells: Path, kind: str | None = None) -> int:
    """Poke every live consumer's FIFO that wants a `kind` message; returns how many."""
    try:
        with safe.scandir(doorbells) as (directory, entries):
            return sum(_ring_one(directory, doorbells / e.name, kind) for e in entries)
    except (OSError, ActorsError):  # missing, or a planted link: nobody to wake there
        return 0


def _ring_one(directory: int, path: Path, kind: str | None) -> int:
    name = path.name
    if not name.endswith(".fifo") or not wants(name, kind):
        return 0
    try:
        fd = open_bell(path, directory)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            _remove_if_orphaned(directory, name)
        return 0
    if fd is None:
        return 0
    try:
        os.write(fd, b"\n")
        return 1
    except BlockingIOError:
        return 1  # full pipe: a wake is already pending
    except OSError:
        return 0
    finally:
        os.close(fd)


def _remove_if_orphaned(directory: int, name: str) -> None:
    pid_text = name.split("-", 1)[0]
    if pid_text.isdigit() and read_stat(int(pid_text)) is None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=directory)


class Bell:
    """A private FIFO in a `doorbells/` directory, open for reading (non-blocking): a
    consumer's doorbell. With a `topic` it is rung only for message types under
    `<topic>.`.

    The consumer also holds a write end itself so the read end never reports a hang-up
    (which would make poll() spin) after a sender closes. A runner that parks by exec()
    keeps both descriptors and its path across the exec (`adopt`)."""

    __slots__ = ("path", "read", "write")

    def __init__(self, read: int, write: int, path: Path) -> None:
        self.read, self.write, self.path = read, write, path

    @classmethod
    def open(cls, doorbells: Path, topic: str | None = None) -> Bell:
        ensure_dir(doorbells)
        suffix = f".{topic}.fifo" if topic else ".fifo"
        name = f"{os.getpid()}-{os.urandom(4).hex()}{suffix}"
        directory = safe.open_dir(doorbells)
        try:
            os.mkfifo(name, 0o600, dir_fd=directory)
            nofollow = os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
            read_fd = os.open(name, os.O_RDONLY | nofollow, dir_fd=directory)
            write_fd = os.open(name, os.O_WRONLY | nofollow, dir_fd=directory)
        finally:
            os.close(directory)
        return cls(read_fd, write_fd, doorbells / name)

    def drain(self) -> None:
        """Take the pending rings (any number of them is one wake)."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.read, 65536)

    def close(self) -> None:
        os.close(self.write)
        os.close(self.read)
        with contextlib.suppress(OSError, ActorsError):
            safe.unlink(self.path)


@contextlib.contextmanager
def doorbell(doorbells: Path, topic: str | None = None) -> Iterator[int]:
    """A `Bell` for the length of a `with` block; yields its read descriptor."""
    bell = Bell.open(doorbells, topic)
    try:
        yield bell.read
    finally:
        bell.close()

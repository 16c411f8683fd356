"""Whole-line appends to journals, and the one advisory lock helper.

A JSONL record is one `write()` of one whole line on an O_APPEND descriptor, under an
exclusive `flock`, with the fsync (when asked for) after the unlock so concurrent writers
still group-commit; a failed write is cut back so no partial record remains, and a
journal past its cap is compacted under the same lock (docs/state-files.md).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from runtime.core import config
from runtime.core.errors import ActorsError, BadInput, StateDamaged
from runtime.core.faults import pause_point
from runtime.store import safe
from runtime.store.reads import MAX_JOURNAL_BYTES
from runtime.store.writes import (
    FILE_MODE,
    O_CLOEXEC,
    O_NOFOLLOW,
    DiskWriteError,
    disk_error,
    write_all,
    write_bytes_atomic,
)

MAX_LINE_BYTES = 1024 * 1024
"""The largest JSONL record we write; bigger payloads belong in an artifact file."""


compact_json = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
).encode
"""The one JSON form of every journal line and envelope (built once: `json.dumps` with
options builds a new encoder per call, a third of the cost of a small record). NaN and
Infinity are refused (ValueError): no reader takes them back (runtime.core.bounded_json)."""


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One compact JSON object plus a newline; JSON escapes keep it a single line."""
    try:
        data = compact_json(record)
    except ValueError as exc:  # NaN, Infinity or a cycle: no reader could take it back
        raise BadInput(f"a record is not JSON data: {exc}") from None
    line = (data + "\n").encode("utf-8")
    if len(line) > MAX_LINE_BYTES:
        raise DiskWriteError(
            f"record of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte line cap",
            hint="put large payloads in an artifact file and reference its path",
        )
    return line


class Compactor(Protocol):
    """How a journal is kept within its cap (see runtime.store.journals); run under its flock."""

    def due(self, fd: int, end: int) -> bool:
        """Whether a journal that now ends at `end` should be rewritten."""
        ...

    def rewrite(self, data: bytes) -> bytes:
        """The whole new content (marker first) for the journal's current bytes."""
        ...


def lock_current(path: Path, fd: int | None = None, *, wait_s: float | None = None) -> int:
    """An exclusively flocked descriptor on the file that is *now* at `path`.

    A compaction replaces a journal by rename while holding the old file's flock; a
    writer that was waiting for that lock would otherwise append to the unlinked old
    file and the line would be lost. So after locking, the descriptor's inode must still
    be the path's, else it reopens and tries again. `fd` (kept open by a streaming
    writer) is reused when it is still current, closed when it is not. With `wait_s`,
    a lock held longer than that (by a stopped process) raises LockBusy instead of
    blocking forever.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | O_NOFOLLOW | O_CLOEXEC
    while True:
        try:
            parent, name = safe.open_parent(path)
        except OSError as exc:
            raise disk_error("open", path, exc) from exc
        try:
            if fd is None:
                fd = _open_journal(parent, name, path, flags)
            try:
                take_lock(fd, path, wait_s)
            except LockBusy:
                os.close(fd)
                raise
            try:
                current = os.stat(name, dir_fd=parent, follow_symlinks=False).st_ino
            except FileNotFoundError:
                current = None
        finally:
            os.close(parent)
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)  # releases the lock on the replaced file
        fd = None


def _open_journal(parent: int, name: str, path: Path, flags: int) -> int:
    """The journal open for appending: never through a link, symbolic or hard (a hard
    link planted here would have every record appended to a file elsewhere), and only a
    regular file."""
    try:
        fd = os.open(name, flags, FILE_MODE, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDamaged(
                f"{path} is a symlink; refusing to write through it", path=path
            ) from exc
        raise disk_error("open", path, exc) from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
            raise safe.refused_hard_link(path, st.st_nlink)
        raise StateDamaged(
            f"{path} is not a regular file; refusing to write to it",
            hint="nothing else belongs where a journal lives; remove it",
            path=path,
        )
    return fd


def write_locked(fd: int, path: Path, line: bytes, compactor: Compactor | None = None) -> int:
    """Append `line` through a descriptor from `lock_current` (still locked); returns the
    journal's new end. Compacts in place of the append's caller when the cap is passed."""
    start = os.lseek(fd, 0, os.SEEK_END)
    if start and os.pread(fd, 1, start - 1) != b"\n":
        line = b"\n" + line
    pause_point("files.append.before_write")
    try:
        write_all(fd, line, path)
    except DiskWriteError:
        # Never leave a partial record: cut the file back to where we began, and a
        # journal this line would have begun is not left behind empty.
        with contextlib.suppress(OSError, ActorsError):
            os.ftruncate(fd, start)
            if start == 0:
                _drop_if_empty(fd, path)
        raise
    pause_point("files.append.after_write")
    end = start + len(line)
    if compactor is not None and compactor.due(fd, end):
        # the line is already written; a compaction that cannot be written (a full disk)
        # leaves the journal whole and is tried again at a later append
        with contextlib.suppress(OSError, ActorsError):
            _compact_locked(fd, path, compactor)
    return end


def _drop_if_empty(fd: int, path: Path) -> None:
    """Remove the journal `fd` (locked by us) if it is empty and still at `path`. A
    writer waiting for the lock then finds its descriptor stale and makes the journal
    afresh (`lock_current`), so no line goes to the removed file."""
    if os.fstat(fd).st_size:
        return
    parent, name = safe.open_parent(path)
    try:
        if os.stat(name, dir_fd=parent, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
            os.unlink(name, dir_fd=parent)
    finally:
        os.close(parent)


def _compact_locked(fd: int, path: Path, compactor: Compactor) -> None:
    size = os.fstat(fd).st_size
    if size > MAX_JOURNAL_BYTES:  # damage (its readers say so): not read whole here
        raise StateDamaged(f"{path} is {size} bytes; not compacted", path=path)
    data = os.pread(fd, size, 0)
    pause_point("files.compact.before_replace")
    write_bytes_atomic(path, compactor.rewrite(data))
    pause_point("files.compact.after_replace")


def append_line(
    path: Path,
    line: bytes,
    *,
    fsync: bool = False,
    compactor: Compactor | None = None,
    wait_s: float | None = None,
) -> int:
    """Append one encoded line with a single write under an exclusive flock; returns the
    journal's end offset after it.

    A torn last line (a writer killed mid-record, or a disk that filled) is closed with a
    newline first, so the new record stays a line of its own instead of being glued to the
    garbage (readers skip the torn line). With a `compactor`, a journal past its cap is
    rewritten (under the same lock) before the lock is released. With `wait_s`, a lock
    held longer than that raises LockBusy (see `lock_current`)."""
    fd = lock_current(path, wait_s=wait_s)
    try:
        try:
            end = write_locked(fd, path, line, compactor)
        finally:
            unlock(fd)
        pause_point("files.append.after_unlock")
        if fsync:
            try:
                os.fsync(fd)
            except OSError as exc:  # the line is written whole; only its sync failed
                raise disk_error("sync", path, exc) from exc
        return end
    finally:
        os.close(fd)


def append_jsonl(
    path: Path,
    record: Mapping[str, Any],
    *,
    fsync: bool = False,
    compactor: Compactor | None = None,
    wait_s: float | None = None,
) -> int:
    """Append one JSON record as a whole line (see `append_line`)."""
    return append_line(path, encode_line(record), fsync=fsync, compactor=compactor, wait_s=wait_s)


@contextlib.contextmanager
def locked(path: Path, *, timeout_s: float | None = None) -> Iterator[None]:
    """Hold an exclusive flock on a sidecar lock file for a multi-step update.

    With `timeout_s`, give up with LockBusy after that long (a hook must not hang on a
    lock some other process holds too long)."""
    try:
        fd = safe.open_file(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except ActorsError:
        raise
    except OSError as exc:
        raise disk_error("open the lock", path, exc) from exc
    try:
        take_lock(fd, path, timeout_s)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def try_locked(path: Path) -> Iterator[bool]:
    """An exclusive flock on a sidecar lock file if it is free now: yields whether it is
    held (a singleton process that leaves when another already serves)."""
    try:
        fd = safe.open_file(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    except ActorsError:
        raise
    except OSError as exc:
        raise disk_error("open the lock", path, exc) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


class LockBusy(ActorsError, TimeoutError):
    """A lock stayed held past the caller's bound (its holder is stopped or stuck): a
    timeout, so a caller that leaves the work for later on TimeoutError still does."""


_BOUND = config.seconds(config.LOCK_BOUND) if config.text(config.LOCK_BOUND) else None
"""ACTORS_LOCK_BOUND (tests): every lock wait without a bound of its own gets this one,
so a lock held by a process a test paused fails that test, naming the lock, instead of
hanging the suite."""


def take_lock(fd: int, path: Path, seconds: float | None = None) -> None:
    """An exclusive flock on `fd`: blocking, or at most `seconds` (else the test bound),
    then LockBusy naming the file.

    The bounded wait blocks in flock() cut by SIGALRM on the main thread; elsewhere (a
    worker thread cannot take signals) it retries at a doubling interval (1 ms up to
    50 ms), the only way to bound it there. Uncontended, either is one flock() call."""
    if seconds is None:
        seconds = _BOUND
    if seconds is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    import signal  # here, not at the top: only a contended bounded wait needs these
    import threading
    import time

    busy = LockBusy(
        f"{path} stayed locked for {seconds:g}s by another process",
        hint="a stopped process may hold it (`fuser` names it); nothing was written",
    )
    if threading.current_thread() is threading.main_thread():

        def expired(signum: int, frame: Any) -> None:
            raise busy

        previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    deadline, pause = time.monotonic() + seconds, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise busy from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.05)


def unlock(fd: int) -> None:
    """Release the flock of a descriptor from `lock_current` that is kept open."""
    fcntl.flock(fd, fcntl.LOCK_UN)

"""Readers of state files: never through a symlink, never a half-written record, never
more than a file of its kind can hold.

A last line without its newline is a torn tail (a write in progress, or a crash
mid-append) and is left unread; lines that are not bounded JSON objects are skipped; a
journal's compaction marker is reported apart from its records (docs/state-files.md).
Every parse goes through runtime.core.bounded_json, and every file is size-capped before
it is read, so a file a run wrote over its own state (nested a million deep, a sparse
file of a terabyte, a FIFO) is reported as damage naming it, never a crash or a hang.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runtime.core.bounded_json import MAX_DEPTH, Undecodable, decode
from runtime.core.errors import (
    RESOURCE_FIXES,
    TRANSIENT,
    ActorsError,
    ResourceError,
    StateDamaged,
)
from runtime.store import safe
from runtime.store.layout import rotated

MAX_JSON_BYTES = 16 * 1024 * 1024
"""The largest whole-JSON state file read (run.json, result.json, session.json, ...):
far above any record actors writes, so a bigger one is damage, refused unread."""
MAX_JOURNAL_BYTES = 256 * 1024 * 1024
"""The largest journal read: a run's journals are compacted at their cap (4 MiB by
default) and a session's grow by a few KiB a follow-up, so one past this (a run writing
its own, a sparse file of any size) is damage, refused unread."""


def open_nofollow(path: Path) -> int:
    """Open a state file for reading: never through a planted symlink, and only a regular
    file (a FIFO or directory there is refused as damage, never waited on)."""
    try:
        return safe.open_regular(path, os.O_RDONLY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDamaged(
                f"{path} is a symlink; refusing to read through it", path=path
            ) from None
        raise


def read_bytes(path: Path, *, offset: int = 0, limit: int | None = None) -> bytes:
    """Read a file (or a slice of it) without following symlinks."""
    fd = open_nofollow(path)
    try:
        if offset:
            os.lseek(fd, offset, os.SEEK_SET)
        chunks: list[bytes] = []
        remaining = limit
        while remaining is None or remaining > 0:
            chunk = os.read(fd, 1 << 20 if remaining is None else min(1 << 20, remaining))
            if not chunk:
                break
            chunks.append(chunk)
            if remaining is not None:
                remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def unreadable(path: Path, exc: OSError) -> ActorsError:
    """A state file that could not be read: the machine's lack (no descriptor or memory
    left, an I/O error) is a ResourceError, anything else damage (the file is kept)."""
    if exc.errno in TRANSIENT or exc.errno == errno.EIO:
        return ResourceError(
            f"cannot read {path}: {exc.strerror}", hint=RESOURCE_FIXES.get(exc.errno or 0)
        )
    return StateDamaged(f"cannot read {path}: {exc.strerror}", path=path)


def read_json(path: Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any | None:
    """The parsed file, None when it does not exist, StateDamaged naming the file when it
    cannot be used: not a regular file, larger than `max_bytes`, or not bounded JSON
    (runtime.core.bounded_json: no deep nesting, NaN, or undecodable text)."""
    try:
        fd = open_nofollow(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise unreadable(path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise StateDamaged(
                f"{path} is {size} bytes, more than any such file holds ({max_bytes})",
                hint="the file is kept",
                path=path,
            )
        data = os.read(fd, max_bytes + 1)
    except OSError as exc:
        raise unreadable(path, exc) from exc
    finally:
        os.close(fd)
    try:
        return decode(data, max_bytes=max_bytes)
    except Undecodable as exc:
        raise StateDamaged(
            f"{path} is not valid JSON ({exc})", hint="the file is kept", path=path
        ) from None


class JsonlChunk:
    """Records parsed from a JSONL file, and where the next read should start.

    A plain class, not a dataclass: this module is on every CLI call's import path, and
    `dataclasses` (with the `inspect` it imports) costs more than the whole message send.
    """

    __slots__ = (
        "bad_lines",
        "compaction",
        "identity",
        "more",
        "next_offset",
        "records",
        "reset",
        "torn_tail",
    )

    def __init__(self, next_offset: int = 0, reset: bool = False) -> None:
        self.records: list[dict[str, Any]] = []
        self.next_offset = next_offset
        self.bad_lines = 0
        self.torn_tail = False
        self.compaction: dict[str, Any] | None = None
        """The compaction marker met in these lines (never part of `records`)."""
        self.identity: tuple[int, int] | None = None
        """Which file was read (inode, compaction generation); pass it back with
        `next_offset` to read on incrementally."""
        self.reset = reset
        """The journal was replaced (compacted) since `identity`: this read started at 0."""
        self.more = False
        """A read with a `limit` stopped early: read again from `next_offset`."""

    def __repr__(self) -> str:
        return (
            f"JsonlChunk({len(self.records)} records, next_offset={self.next_offset}, "
            f"bad_lines={self.bad_lines}, torn_tail={self.torn_tail}, "
            f"compaction={self.compaction}, reset={self.reset})"
        )


def parse_jsonl(data: bytes, *, base_offset: int = 0) -> JsonlChunk:
    """Parse complete lines; a trailing fragment without newline is left for later."""
    out = JsonlChunk(next_offset=base_offset)
    end = data.rfind(b"\n")
    if end < 0:
        out.torn_tail = bool(data)
        return out
    out.torn_tail = end != len(data) - 1
    out.next_offset = base_offset + end + 1
    body = data[:end]
    values = _parse_whole(body)
    if values is None:
        values = [value for _, value in _each_line(body.split(b"\n"))]
    for value in values:
        _take(out, value)
    return out


def parse_lines(data: bytes) -> list[tuple[bytes, Any]]:
    """Each complete line with its parsed value (None for a line that is not JSON), for a
    rewrite that keeps untouched lines byte for byte instead of encoding them again."""
    end = data.rfind(b"\n")
    if end < 0:
        return []
    body = data[:end]
    raw = body.split(b"\n")
    values = _parse_whole(body)
    if values is not None:
        return list(zip(raw, values, strict=True))
    return _each_line(raw)


def _each_line(lines: list[bytes]) -> list[tuple[bytes, Any]]:
    """Judge each non-blank line alone: its value, or None when it is not bounded JSON (a
    JSON `null` line is None too; no journal record is one, so both count as bad)."""
    out: list[tuple[bytes, Any]] = []
    for line in lines:
        if line.strip():
            try:
                out.append((line, decode(line)))
            except Undecodable:
                out.append((line, None))
    return out


def _parse_whole(body: bytes) -> list[Any] | None:
    """Every line of `body` (complete lines, last newline cut) as one JSON array (one
    decoder call instead of one per line: 2-3x faster), or None when any line is blank,
    torn, not one value, or not bounded (too deep, NaN, ...): the line-by-line path then
    judges each. JSON text never holds a raw newline, so each line is one array item
    unless a damaged line holds a top-level comma: the count catches that."""
    try:
        values = decode(b"[" + body.replace(b"\n", b",") + b"]", max_depth=MAX_DEPTH + 1)
    except Undecodable:
        return None
    return values if len(values) == body.count(b"\n") + 1 else None


def _take(out: JsonlChunk, value: Any) -> None:
    if isinstance(value, dict):
        if "compaction" in value and "id" not in value:
            out.compaction = value["compaction"]
        else:
            out.records.append(value)
    else:
        out.bad_lines += 1


def marker_of(head: bytes) -> dict[str, Any]:
    """The compaction marker that opens a journal (given its first bytes), else {}."""
    if not head.startswith(b'{"compaction"'):
        return {}
    end = head.find(b"\n")
    try:
        found = decode(head[: end if end >= 0 else len(head)])
    except Undecodable:
        return {}
    marker = found.get("compaction") if isinstance(found, dict) else None
    return marker if isinstance(marker, dict) else {}


def _identity(fd: int) -> tuple[int, int]:
    """A journal file's identity for incremental readers: the inode alone is not enough,
    as a compaction's new file may get the inode number of the one before last (freed
    once nobody holds it open); the marker's generation rises with every compaction."""
    generation = marker_of(os.pread(fd, 1024, 0)).get("generation", 0)
    return os.fstat(fd).st_ino, generation if isinstance(generation, int) else 0


def read_jsonl(
    path: Path,
    *,
    offset: int = 0,
    identity: tuple[int, int] | None = None,
    limit: int | None = None,
) -> JsonlChunk:
    """Read records from `offset`; a missing file is an empty journal.

    An incremental reader passes back the `identity` of its last read: when the journal
    has been replaced by a compaction since, it is read again from the start (`reset`).
    With a `limit`, about that many bytes are read (whole lines; one longer line whole)
    and `more` says whether the journal goes on, so a reader's memory stays bounded.
    A journal larger than `MAX_JOURNAL_BYTES` is damage (StateDamaged naming it).
    """
    try:
        fd = open_nofollow(path)
    except FileNotFoundError:
        known = identity is not None
        return JsonlChunk(next_offset=0 if known else offset, reset=known)
    except OSError as exc:
        raise unreadable(path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        if size > MAX_JOURNAL_BYTES:
            raise StateDamaged(
                f"{path} is {size} bytes, more than any journal holds ({MAX_JOURNAL_BYTES})",
                hint="the file is kept",
                path=path,
            )
        current = _identity(fd)
        reset = identity is not None and current != identity
        if reset:
            offset = 0
        chunks = []
        position = offset
        more = False
        while position < MAX_JOURNAL_BYTES:  # (it may grow while it is read)
            chunk = os.pread(fd, 1 << 20, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            if limit is not None and position - offset >= limit and b"\n" in chunk:
                more = True
                break
    except OSError as exc:
        raise unreadable(path, exc) from exc
    finally:
        os.close(fd)
    try:
        out = parse_jsonl(b"".join(chunks), base_offset=offset)
    except MemoryError:
        raise StateDamaged(f"{path} is too large to read here", path=path) from None
    out.identity, out.reset, out.more = current, reset, more
    return out


def tail_jsonl(path: Path, count: int, *, window: int = 256 * 1024) -> list[dict[str, Any]]:
    """The last `count` records, reading only the end of a large journal."""
    if count <= 0:
        return []
    try:
        size = safe.lstat(path).st_size
    except FileNotFoundError:
        return []
    start = max(0, size - window)
    data = read_bytes(path, offset=start, limit=size - start)
    if start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return parse_jsonl(data).records[-count:]


def fold(records: Iterable[dict[str, Any]], key: str = "id") -> dict[str, dict[str, Any]]:
    """Current state of append-only entries: later lines with the same key update fields.

    Insertion order is the order of first appearance, so queues keep arrival order.
    Records without the key are ignored (they cannot name what they change).
    """
    state: dict[str, dict[str, Any]] = {}
    for record in records:
        ident = record.get(key)
        if not isinstance(ident, str):
            continue
        current = state.get(ident)
        if current is None:
            state[ident] = dict(record)
        else:
            current.update(record)
    return state


def read_text_tail(
    path: Path, lines: int, *, window: int = 256 * 1024, upto: int | None = None
) -> list[str]:
    """The last `lines` lines of a log file (decoded leniently) before byte `upto` (its
    end when None: a follower passes the size it goes on from, so no byte is skipped or
    shown twice); a log that rotated a moment ago (few lines yet) is continued from its
    previous file (`<name>.1`)."""
    if lines <= 0:
        return []
    parts, whole = _tail_lines(path, window, upto)
    if len(parts) < lines and whole:
        parts = _tail_lines(rotated(path), window)[0] + parts
    return parts[-lines:]


def _tail_lines(path: Path, window: int, upto: int | None = None) -> tuple[list[str], bool]:
    """(the lines of the file's last `window` bytes before `upto`, whether that was the
    whole file)."""
    try:
        size = safe.lstat(path).st_size
    except FileNotFoundError:
        return [], True
    size = size if upto is None else min(size, upto)
    start = max(0, size - window)
    text = read_bytes(path, offset=start, limit=size - start).decode("utf-8", errors="replace")
    parts = text.splitlines()
    if start and parts:
        parts = parts[1:]
    return parts, start == 0

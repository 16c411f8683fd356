"""Durable file primitives every writer in the project goes through.

Rules they enforce (see docs/state-files.md):
- directories are created 0700 and files 0600 whatever the umask;
- a JSON file is replaced atomically (temp file, fsync, rename, fsync of the directory);
- a JSONL record is one `write()` of one whole line on an O_APPEND descriptor, under an
  advisory `flock`, with the fsync (when asked for) after the unlock so concurrent
  writers still group-commit;
- readers never follow symlinks, and treat a last line without its newline as not yet
  written (a torn tail), so a crash mid-append never yields a half record.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from runtime.core.errors import ActorsError, StateDamaged
from runtime.core.faults import pause_point

DIR_MODE = 0o700
FILE_MODE = 0o600
MAX_LINE_BYTES = 1024 * 1024
"""The largest JSONL record we write; bigger payloads belong in an artifact file."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class DiskWriteError(ActorsError):
    """A write failed (disk full, permissions); nothing partial was left behind."""


def ensure_dir(path: Path, *, tighten: bool = True) -> Path:
    """Create `path` (and parents) with mode 0700; tighten it if it already exists (not
    with `tighten=False`: a directory another program owns, e.g. Claude Code's, is left as
    it is)."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for component in reversed(missing):  # parents too get 0700, not the umask default
        try:
            component.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(component, DIR_MODE)
    if not path.is_dir():
        raise StateDamaged(f"{path} exists and is not a directory")
    if path.is_symlink():
        raise StateDamaged(f"{path} is a symlink; refusing to use it as a state directory")
    st = path.stat()
    if tighten and st.st_mode & 0o777 != DIR_MODE and st.st_uid == os.getuid():
        os.chmod(path, DIR_MODE)
    return path


compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
"""The one JSON form of every journal line and envelope (built once: `json.dumps` with
options builds a new encoder per call, a third of the cost of a small record)."""


def encode_line(record: dict[str, Any]) -> bytes:
    """One compact JSON object plus a newline; JSON escapes keep it a single line."""
    data = compact_json(record)
    line = (data + "\n").encode("utf-8")
    if len(line) > MAX_LINE_BYTES:
        raise DiskWriteError(
            f"record of {len(line)} bytes exceeds the {MAX_LINE_BYTES}-byte line cap",
            hint="put large payloads in an artifact file and reference its path",
        )
    return line


def _write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    while view:
        try:
            pause_point("files.write")
            written = os.write(fd, view)
        except OSError as exc:
            raise DiskWriteError(f"cannot write {path}: {exc.strerror}") from exc
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace `path` with `data` so readers see the old or the new content, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    try:
        fd = os.open(tmp, flags, FILE_MODE)
    except OSError as exc:
        raise DiskWriteError(f"cannot create {tmp}: {exc.strerror}") from exc
    try:
        try:
            _write_all(fd, data, path)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        pause_point("files.atomic.after_tmp")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    pause_point("files.atomic.after_rename")
    if fsync:
        _fsync_dir(path.parent)


def dump_json(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2, default=str) + "\n").encode("utf-8")


def write_json_atomic(path: Path, obj: Any, *, fsync: bool = True) -> None:
    """Atomically replace a JSON file (0600)."""
    write_bytes_atomic(path, dump_json(obj), fsync=fsync)


def publish_json_once(path: Path, obj: Any) -> bool:
    """Create `path` atomically unless it already exists; True when this call created it.

    Used for records with exactly one writer-wins outcome (result.json): the content is
    written to a temp file and hard-linked into place, which fails if the name exists, so
    two racing writers can never both publish or overwrite each other.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        try:
            _write_all(fd, dump_json(obj), path)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        _fsync_dir(path.parent)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


class Compactor(Protocol):
    """How a journal is kept within its cap (see runtime.store.journals); run under its flock."""

    def due(self, fd: int, end: int) -> bool:
        """Whether a journal that now ends at `end` should be rewritten."""
        ...

    def rewrite(self, data: bytes) -> bytes:
        """The whole new content (marker first) for the journal's current bytes."""
        ...


def lock_current(path: Path, fd: int | None = None) -> int:
    """An exclusively flocked descriptor on the file that is *now* at `path`.

    A compaction replaces a journal by rename while holding the old file's flock; a
    writer that was waiting for that lock would otherwise append to the unlinked old
    file and the line would be lost. So after locking, the descriptor's inode must still
    be the path's, else it reopens and tries again. `fd` (kept open by a streaming
    writer) is reused when it is still current, closed when it is not.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC
    while True:
        if fd is None:
            try:
                fd = os.open(path, flags, FILE_MODE)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise StateDamaged(
                        f"{path} is a symlink; refusing to write through it"
                    ) from exc
                raise DiskWriteError(f"cannot open {path}: {exc.strerror}") from exc
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)  # releases the lock on the replaced file
        fd = None


def write_locked(fd: int, path: Path, line: bytes, compactor: Compactor | None = None) -> int:
    """Append `line` through a descriptor from `lock_current` (still locked); returns the
    journal's new end. Compacts in place of the append's caller when the cap is passed."""
    start = os.lseek(fd, 0, os.SEEK_END)
    if start and os.pread(fd, 1, start - 1) != b"\n":
        line = b"\n" + line
    pause_point("files.append.before_write")
    try:
        _write_all(fd, line, path)
    except DiskWriteError:
        # Never leave a partial record: cut the file back to where we began.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise
    pause_point("files.append.after_write")
    end = start + len(line)
    if compactor is not None and compactor.due(fd, end):
        # the line is already written; a compaction that cannot be written (a full disk)
        # leaves the journal whole and is tried again at a later append
        with contextlib.suppress(OSError, ActorsError):
            _compact_locked(fd, path, compactor)
    return end


def _compact_locked(fd: int, path: Path, compactor: Compactor) -> None:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    pause_point("files.compact.before_replace")
    write_bytes_atomic(path, compactor.rewrite(data))
    pause_point("files.compact.after_replace")


def append_line(
    path: Path, line: bytes, *, fsync: bool = False, compactor: Compactor | None = None
) -> int:
    """Append one encoded line with a single write under an exclusive flock; returns the
    journal's end offset after it.

    A torn last line (a writer killed mid-record, or a disk that filled) is closed with a
    newline first, so the new record stays a line of its own instead of being glued to the
    garbage (readers skip the torn line). With a `compactor`, a journal past its cap is
    rewritten (under the same lock) before the lock is released."""
    fd = lock_current(path)
    try:
        try:
            end = write_locked(fd, path, line, compactor)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        pause_point("files.append.after_unlock")
        if fsync:
            os.fsync(fd)
        return end
    finally:
        os.close(fd)


def append_jsonl(
    path: Path, record: dict[str, Any], *, fsync: bool = False, compactor: Compactor | None = None
) -> int:
    """Append one JSON record as a whole line (see `append_line`)."""
    return append_line(path, encode_line(record), fsync=fsync, compactor=compactor)


def open_nofollow(path: Path) -> int:
    """Open for reading without following a planted symlink (refused as damage)."""
    try:
        return os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDamaged(f"{path} is a symlink; refusing to read through it") from None
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


def read_json(path: Path) -> Any | None:
    """The parsed file, None when it does not exist, StateDamaged when unreadable."""
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateDamaged(f"{path} is a symlink; refusing to follow it") from exc
        raise StateDamaged(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateDamaged(f"{path} is not valid JSON ({exc})", hint="the file is kept") from exc


class JsonlChunk:
    """Records parsed from a JSONL file, and where the next read should start.

    A plain class, not a dataclass: this module is on every CLI call's import path, and
    `dataclasses` (with the `inspect` it imports) costs more than the whole message send.
    """

    __slots__ = (
        "bad_lines",
        "compaction",
        "identity",
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
    """Judge each non-blank line alone: its value, or None when it is not JSON (a JSON
    `null` line is None too; no journal record is one, so both count as bad)."""
    out: list[tuple[bytes, Any]] = []
    for line in lines:
        if line.strip():
            try:
                out.append((line, json.loads(line)))
            except (ValueError, UnicodeDecodeError):
                out.append((line, None))
    return out


def _parse_whole(body: bytes) -> list[Any] | None:
    """Every line of `body` (complete lines, last newline cut) as one JSON array (one
    decoder call instead of one per line: 2-3x faster), or None when any line is blank,
    torn or not one value (the line-by-line path then judges each). JSON text never holds
    a raw newline, so each line is one array item unless a damaged line holds a top-level
    comma: the count catches that."""
    try:
        values = json.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except (ValueError, UnicodeDecodeError):
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
        marker = json.loads(head[: end if end >= 0 else len(head)]).get("compaction")
    except ValueError:
        return {}
    return marker if isinstance(marker, dict) else {}


def _identity(fd: int) -> tuple[int, int]:
    """A journal file's identity for incremental readers: the inode alone is not enough,
    as a compaction's new file may get the inode number of the one before last (freed
    once nobody holds it open); the marker's generation rises with every compaction."""
    generation = marker_of(os.pread(fd, 1024, 0)).get("generation", 0)
    return os.fstat(fd).st_ino, generation if isinstance(generation, int) else 0


def read_jsonl(
    path: Path, *, offset: int = 0, identity: tuple[int, int] | None = None
) -> JsonlChunk:
    """Read records from `offset`; a missing file is an empty journal.

    An incremental reader passes back the `identity` of its last read: when the journal
    has been replaced by a compaction since, it is read again from the start (`reset`).
    """
    try:
        fd = open_nofollow(path)
    except FileNotFoundError:
        known = identity is not None
        return JsonlChunk(next_offset=0 if known else offset, reset=known)
    except OSError as exc:
        raise StateDamaged(f"cannot read {path}: {exc.strerror}") from exc
    try:
        current = _identity(fd)
        reset = identity is not None and current != identity
        if reset:
            offset = 0
        chunks = []
        position = offset
        while True:
            chunk = os.pread(fd, 1 << 20, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
    except OSError as exc:
        raise StateDamaged(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    out = parse_jsonl(b"".join(chunks), base_offset=offset)
    out.identity, out.reset = current, reset
    return out


def tail_jsonl(path: Path, count: int, *, window: int = 256 * 1024) -> list[dict[str, Any]]:
    """The last `count` records, reading only the end of a large journal."""
    if count <= 0:
        return []
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return []
    start = max(0, size - window)
    data = read_bytes(path, offset=start)
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


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on a sidecar lock file for a multi-step update."""
    flags = os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_text_tail(path: Path, lines: int, *, window: int = 256 * 1024) -> list[str]:
    """The last `lines` lines of a log file (decoded leniently)."""
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return []
    start = max(0, size - window)
    text = read_bytes(path, offset=start).decode("utf-8", errors="replace")
    parts = text.splitlines()
    if start and parts:
        parts = parts[1:]
    return parts[-lines:] if lines > 0 else []

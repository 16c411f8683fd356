"""Whole-file writes and state directories: the rules every writer goes through.

- directories are created 0700 and files 0600 whatever the umask;
- a JSON file is replaced atomically (temp file, fsync, rename, fsync of the directory),
  so a reader sees the old or the new file, never a mix (docs/state-files.md);
- a published-once record (result.json) is hard-linked into place, so one writer wins.

The line appends live in `runtime.store.appends`, the readers in `runtime.store.reads`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from runtime.core.errors import (
    RESOURCE_FIXES,
    TRANSIENT,
    ActorsError,
    BadInput,
    StateDamaged,
    os_errno,
)
from runtime.core.faults import pause_point
from runtime.store import safe

DIR_MODE = 0o700
FILE_MODE = 0o600
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class DiskWriteError(ActorsError):
    """A write failed (disk full, permissions); nothing partial was left behind."""


def disk_error(action: str, path: Path | str, exc: OSError) -> DiskWriteError:
    """`cannot <action> <path>: <reason>; <what to do>`, raised from `exc` (so a caller
    that may wait it out can read its errno: runtime.core.errors.os_errno)."""
    error = DiskWriteError(
        f"cannot {action} {os.fspath(path)}: {exc.strerror}",
        hint=RESOURCE_FIXES.get(exc.errno or 0),
    )
    error.__cause__ = exc
    return error


T = TypeVar("T")

PATIENCE_FIRST_S = 0.05
PATIENCE_MAX_S = 2.0
"""`patiently` retries after 50 ms, doubling up to every 2 s: a disk freed again is
noticed within about 2 s, and a disk that stays full costs one attempt per 2 s."""


def patiently(step: Callable[[], T], what: str) -> T:
    """`step()`, repeated with backoff while it fails for a lack the machine may get back
    (runtime.core.errors.TRANSIENT: a full disk, no descriptor or memory left, a
    read-only remount) until it succeeds; any other error is raised at once.

    For a writer whose record would otherwise be lost: a runner ending its run waits for
    the disk instead of dying with the outcome in memory. `step` must be a whole write
    that takes and releases its own locks (nothing is held while waiting) and that
    leaves nothing behind when it fails, so repeating it never doubles a record. The
    first failure and the recovery are said on stderr (a runner's runner.log) when that
    can still be written; when it cannot, the waiting goes on all the same."""
    delay, since = PATIENCE_FIRST_S, 0.0
    while True:
        try:
            value = step()
        except Exception as exc:
            if os_errno(exc) not in TRANSIENT:
                raise
            if not since:
                since = time.monotonic()
                _note(f"cannot {what} ({exc}); retrying until it can")
            time.sleep(delay)
            delay = min(delay * 2, PATIENCE_MAX_S)
            continue
        if since:
            _note(f"{what}: done after {time.monotonic() - since:.1f} s of waiting")
        return value


def _note(text: str) -> None:
    """One line on fd 2 (unbuffered: a full disk cannot leave half of it queued)."""
    from runtime.core.ids import now_iso

    with contextlib.suppress(OSError):
        os.write(2, f"{now_iso()} actors: {text}\n".encode(errors="replace"))


def ensure_dir(path: Path, *, tighten: bool = True) -> Path:
    """Create `path` (and parents) with mode 0700; tighten it if it already exists (not
    with `tighten=False`: a directory another program owns, e.g. Claude Code's, is left as
    it is). Under the state root no component may be a link (runtime.store.safe)."""
    try:
        fd = safe.open_dir(path, create=True)
    except NotADirectoryError:
        raise StateDamaged(f"{path} exists and is not a directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise safe.refused(path) from None
        raise disk_error("create", path, exc) from exc
    try:
        st = os.fstat(fd)
        if tighten and st.st_mode & 0o777 != DIR_MODE and st.st_uid == os.getuid():
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    return path


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC


def _temp_beside(path: Path) -> Path:
    """A fresh `.<name>.<pid>.<hex>.tmp` in the target's directory: a rename or link
    from there is atomic, and a leftover is recognisably ours."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def temp_writer(name: str) -> int | None:
    """The pid that made a temp file named by `_temp_beside`, else None (not one of ours),
    so a sweep can remove those whose writer died between writing and renaming."""
    parts = name.split(".")
    if len(parts) >= 5 and parts[0] == "" and parts[-1] == "tmp" and parts[-3].isdigit():
        return int(parts[-3])
    return None


def create_private(path: Path) -> bool:
    """Create `path` as an empty 0600 file unless something is there already (a file, or
    a link, dangling or not: its target is never created). True when this call made it."""
    try:
        fd = os.open(path, _NEW_FILE, FILE_MODE)
    except FileExistsError:
        return False
    except OSError as exc:
        raise disk_error("create", path, exc) from exc
    os.close(fd)
    return True


def write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    while view:
        try:
            pause_point("files.write")
            written = os.write(fd, view)
        except OSError as exc:
            raise disk_error("write", path, exc) from exc
        view = view[written:]


def fsync_dir(path: Path) -> None:
    safe.fsync_dir(path)


def _new_temp(parent: int, path: Path) -> tuple[str, int]:
    """A fresh temp file beside `path` (in its directory's descriptor `parent`)."""
    name = _temp_beside(path).name
    try:
        return name, os.open(name, _NEW_FILE, FILE_MODE, dir_fd=parent)
    except OSError as exc:
        raise disk_error("create", path.parent / name, exc) from exc


def _open_parent(path: Path) -> tuple[int, str]:
    """The directory a state file is written in (link-safely), as a DiskWriteError when
    it cannot be opened (no descriptor left, a vanished directory)."""
    try:
        return safe.open_parent(path)
    except ActorsError:
        raise
    except OSError as exc:
        raise disk_error("open the directory of", path, exc) from exc


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace `path` with `data` so readers see the old or the new content, never a mix.
    The rename is relative to the directory's descriptor: a link planted at `path` is
    replaced, never written through."""
    parent, name = _open_parent(path)
    try:
        tmp, fd = _new_temp(parent, path)
        try:
            try:
                write_all(fd, data, path)
                if fsync:
                    _fsync(fd, path)
            finally:
                os.close(fd)
            pause_point("files.atomic.after_tmp")
            try:
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except IsADirectoryError:  # planted where the file lives: damage, kept
                raise StateDamaged(
                    f"{path} is a directory, not a regular file",
                    hint="nothing else belongs where a state file lives; remove it",
                    path=path,
                ) from None
            except OSError as exc:
                raise disk_error("replace", path, exc) from exc
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
        pause_point("files.atomic.after_rename")
        if fsync:
            _fsync(parent, path.parent)
    finally:
        os.close(parent)


def _fsync(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise disk_error("sync", path, exc) from exc


def dump_json(obj: Any) -> bytes:
    """The form of every whole-JSON state file; NaN and Infinity are refused (no reader
    takes them back: runtime.core.bounded_json)."""
    try:
        text = json.dumps(obj, ensure_ascii=False, indent=2, default=str, allow_nan=False)
    except ValueError as exc:
        raise BadInput(f"a record is not JSON data: {exc}") from None
    return (text + "\n").encode("utf-8")


def write_json_atomic(path: Path, obj: Any, *, fsync: bool = True) -> None:
    """Atomically replace a JSON file (0600)."""
    write_bytes_atomic(path, dump_json(obj), fsync=fsync)


def publish_json_once(path: Path, obj: Any) -> bool:
    """Create `path` atomically unless it already exists; True when this call created it.

    Used for records with exactly one writer-wins outcome (result.json): the content is
    written to a temp file and hard-linked into place, which fails if the name exists (a
    planted link included), so two racing writers can never both publish or overwrite
    each other.
    """
    parent, name = _open_parent(path)
    try:
        tmp, fd = _new_temp(parent, path)
        try:
            try:
                write_all(fd, dump_json(obj), path)
                _fsync(fd, path)
            finally:
                os.close(fd)
            try:
                os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
            except FileExistsError:
                return False
            except OSError as exc:
                raise disk_error("publish", path, exc) from exc
            _fsync(parent, path.parent)
            return True
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
    finally:
        os.close(parent)

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
from pathlib import Path
from typing import Any

from runtime.core.errors import ActorsError, BadInput, StateDamaged
from runtime.core.faults import pause_point
from runtime.store import safe

DIR_MODE = 0o700
FILE_MODE = 0o600
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class DiskWriteError(ActorsError):
    """A write failed (disk full, permissions); nothing partial was left behind."""


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
        raise
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
        raise DiskWriteError(f"cannot create {path}: {exc.strerror}") from exc
    os.close(fd)
    return True


def write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    while view:
        try:
            pause_point("files.write")
            written = os.write(fd, view)
        except OSError as exc:
            raise DiskWriteError(f"cannot write {path}: {exc.strerror}") from exc
        view = view[written:]


def fsync_dir(path: Path) -> None:
    safe.fsync_dir(path)


def _new_temp(parent: int, path: Path) -> tuple[str, int]:
    """A fresh temp file beside `path` (in its directory's descriptor `parent`)."""
    name = _temp_beside(path).name
    try:
        return name, os.open(name, _NEW_FILE, FILE_MODE, dir_fd=parent)
    except OSError as exc:
        raise DiskWriteError(f"cannot create {path.parent / name}: {exc.strerror}") from exc


def write_bytes_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace `path` with `data` so readers see the old or the new content, never a mix.
    The rename is relative to the directory's descriptor: a link planted at `path` is
    replaced, never written through."""
    parent, name = safe.open_parent(path)
    try:
        tmp, fd = _new_temp(parent, path)
        try:
            try:
                write_all(fd, data, path)
                if fsync:
                    os.fsync(fd)
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
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
        pause_point("files.atomic.after_rename")
        if fsync:
            os.fsync(parent)
    finally:
        os.close(parent)


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
    parent, name = safe.open_parent(path)
    try:
        tmp, fd = _new_temp(parent, path)
        try:
            try:
                write_all(fd, dump_json(obj), path)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
            except FileExistsError:
                return False
            os.fsync(parent)
            return True
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
    finally:
        os.close(parent)

"""Reading and writing a harness's config files for `actors install`, touching nothing
install does not own.

The files belong to the user and their harness, not to actors: a file keeps its mode
(and, when we may, its owner) across every write; a symlinked file is written through
to its target and the link stays; only directories that are missing are created (0700),
and an existing one is never chmodded. Every write is atomic (a temp file beside the
target, renamed over it).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from runtime.core.errors import BadInput

NEW_FILE_MODE = 0o600  # a config file install creates (it may name commands and tokens)
NEW_DIR_MODE = 0o700
_UNCHANGED = "nothing was changed"


def read_config(path: Path) -> tuple[str | None, os.stat_result | None]:
    """A config file's text and its status (through a symlink), or (None, None) when
    there is none. BadInput for what cannot be edited: a dangling link, a directory or
    FIFO, an unreadable file, bytes that are not UTF-8."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise BadInput(
                f"{path} is a symlink to {os.readlink(path)}, which does not exist",
                hint=f"create the target or remove the link; {_UNCHANGED}",
            ) from None
        return None, None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}", hint=_UNCHANGED) from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{path} is not a regular file", hint=f"move it away; {_UNCHANGED}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}", hint=_UNCHANGED) from None
    try:
        return data.decode("utf-8"), st
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text", hint=f"fix it first; {_UNCHANGED}") from None


def make_dirs(directory: Path) -> list[str]:
    """Create the missing directories down to `directory` (0700); an existing one, or a
    symlink to one, is used as it is. Returns those created, outermost first."""
    missing = []
    probe = directory
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    created = []
    try:
        for component in reversed(missing):
            component.mkdir(mode=NEW_DIR_MODE)
            created.append(str(component))
    except OSError as exc:
        remove_dirs(created)
        raise BadInput(f"cannot create {exc.filename}: {exc.strerror}", hint=_UNCHANGED) from None
    return created


def remove_dirs(created: list[str]) -> None:
    """Remove the directories `make_dirs` created, innermost first, while they are empty."""
    for directory in reversed(created):
        try:
            os.rmdir(directory)
        except OSError:
            return


def write_config(
    path: Path, data: bytes, st: os.stat_result | None, mode: int | None = None
) -> None:
    """Replace the content of the config file at `path`, keeping the mode (and owner) of
    the file it replaces (`st`; a new file gets 0600; `mode` overrides). A symlink is
    written through: its target gets the content, the link stays."""
    target = Path(os.path.realpath(path))
    if mode is None:
        mode = stat.S_IMODE(st.st_mode) if st is not None else NEW_FILE_MODE
    tmp = target.with_name(f".{target.name}.actors-{os.getpid()}-{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, NEW_FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(fd, st.st_uid, st.st_gid)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def restore_config(path: Path, data: bytes, mode: int | None, link: str | None) -> None:
    """Put a config file back as it was before install: its bytes and mode, and, if it
    was a symlink that has since been replaced by a plain file, the link itself."""
    if link is not None and not path.is_symlink():
        spare = path.with_name(f".{path.name}.actors-{os.getpid()}.link")
        os.symlink(link, spare)
        os.replace(spare, path)
    write_config(path, data, path.stat() if path.exists() else None, mode)

"""Link-safe access to the state root: nothing under it is ever followed through a symlink.

The root itself is resolved once (it may sit under a legitimately linked parent, like
/tmp on some systems); every path under it is reached component by component from the
root's descriptor, each directory opened with O_NOFOLLOW | O_DIRECTORY and the final
name opened, renamed, linked or unlinked relative to its directory's descriptor. A link
at any step is refused as damage, naming the path (docs/state-files.md, *Permissions*).
A state file is opened only when it is a regular file, and written only when it has one
name (`open_regular`): a FIFO planted where a file lives would block its reader, and a
hard link would have the write land in a file elsewhere, as a symlink would.

A path outside every known root (a harness's own config, a test's scratch file) keeps
the older rule: its parents are followed, its final component is not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from runtime.core.errors import StateDamaged

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
DIR_MODE = 0o700
_DIR_FLAGS = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC

_roots: dict[str, str] = {}
"""Each known state root (as spelled) -> its resolved form (resolved once)."""


def register_root(root: Path | str) -> None:
    """Make `root` a state root: paths under it are walked without following links."""
    key = os.fspath(root).rstrip("/") or "/"
    if key not in _roots:
        _roots[key] = os.path.realpath(key)


def _env_root() -> None:
    from runtime.core import config

    with contextlib.suppress(Exception):
        register_root(config.state_root())


def locate(path: Path | str) -> tuple[str, list[str]] | None:
    """(resolved root, the components under it) when `path` lies under a known root."""
    if not _roots:
        _env_root()
    text = os.fspath(path)
    best: tuple[str, list[str]] | None = None
    for key, real in _roots.items():
        if text == key:
            return real, []
        if text.startswith(key + "/"):
            parts = [p for p in text[len(key) + 1 :].split("/") if p and p != "."]
            if ".." in parts:
                return None
            if best is None or len(parts) < len(best[1]):
                best = (real, parts)
    return best


def refused(path: Path | str, what: str = "a symlink") -> StateDamaged:
    return StateDamaged(
        f"{os.fspath(path)} is {what}; refusing to follow it",
        hint="nothing under the state root is ever a link; remove it",
        path=path,
    )


def _why_not_dir(parent: int, name: str, shown: str) -> StateDamaged:
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    return refused(shown, "a symlink" if stat.S_ISLNK(mode) else "not a directory")


def _step(parent: int, name: str, shown: str, create: bool) -> int:
    """The directory `name` under `parent` (created 0700 if missing and `create`)."""
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, DIR_MODE, dir_fd=parent)
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
                os.fchmod(fd, DIR_MODE)  # not the umask's default
                return fd
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                raise _why_not_dir(parent, name, shown) from None
            raise
    raise refused(shown, "changing under us")


def _make_dirs(path: str) -> None:
    """Create `path` and its missing parents, each 0700 whatever the umask (outside a
    state root, or the root itself: its parents are not ours to refuse)."""
    missing = []
    probe = path
    while not os.path.lexists(probe) and probe != os.path.dirname(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    for component in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(component, DIR_MODE)
            os.chmod(component, DIR_MODE)


def _open_plain(path: str, flags: int) -> int:
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP) and os.path.lexists(path):
            what = "a symlink" if os.path.islink(path) else "not a directory"
            raise refused(path, what) from None
        raise


def open_dir(path: Path | str, *, create: bool = False) -> int:
    """A descriptor of the directory `path`, reached without following a link under the
    root (FileNotFoundError when missing, unless `create`: then made 0700 with parents)."""
    text = os.fspath(path)
    where = locate(text)
    if where is None:  # outside every state root: the user's own links are followed
        if create:
            _make_dirs(text)
        return _open_plain(text, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    real, parts = where
    if create:
        _make_dirs(real)
    fd = _open_plain(real, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    for index, name in enumerate(parts):
        try:
            step = _step(fd, name, _prefix(text, parts, index), create)
        finally:
            os.close(fd)
        fd = step
    return fd


def _prefix(path: Path | str, parts: list[str], index: int) -> str:
    """The spelled path up to component `index` (for the message naming the link)."""
    text = os.fspath(path).rstrip("/")
    for _ in range(len(parts) - 1 - index):
        text = os.path.dirname(text)
    return text


def open_parent(path: Path | str, *, create: bool = False) -> tuple[int, str]:
    """A descriptor of `path`'s directory (reached link-safely) and its final name."""
    text = os.fspath(path)
    parent, name = os.path.split(text.rstrip("/"))
    return open_dir(parent or ".", create=create), name


def open_file(path: Path | str, flags: int, mode: int = 0o600, *, create_dirs: bool = False) -> int:
    """Open `path` without following a link at any step under the root; a link at the
    final name is refused too (ELOOP becomes StateDamaged naming it)."""
    parent, name = open_parent(path, create=create_dirs)
    try:
        return os.open(name, flags | O_NOFOLLOW | O_CLOEXEC, mode, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refused(path) from None
        raise
    finally:
        os.close(parent)


_WRITE = os.O_WRONLY | os.O_RDWR
_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket"}


def open_regular(
    path: Path | str, flags: int, mode: int = 0o600, *, create_dirs: bool = False
) -> int:
    """`open_file` for a state file: only a regular file, and none written through a
    hard link. A FIFO, directory or device planted where a file lives is refused as
    damage instead of blocking the open or the read (the open never waits: O_NONBLOCK
    until the file is known to be regular). Opened for writing, a file with another name
    (st_nlink > 1, a hard link to a file elsewhere, like a planted symlink) is refused
    before a byte is written or truncated (O_TRUNC is applied only after the check)."""
    truncate = flags & os.O_TRUNC
    try:
        fd = open_file(path, (flags & ~os.O_TRUNC) | os.O_NONBLOCK, mode, create_dirs=create_dirs)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise _not_regular(path, "a FIFO") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, _KINDS.get(stat.S_IFMT(st.st_mode), "a special file"))
        if flags & _WRITE and st.st_nlink > 1:
            raise refused_hard_link(path, st.st_nlink)
        if flags & _WRITE and not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)  # (a reader keeps it: no effect on a regular file)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_regular(path: Path | str, kind: str) -> StateDamaged:
    return StateDamaged(
        f"{os.fspath(path)} is {kind}, not a regular file",
        hint="nothing else belongs where a state file lives; remove it",
        path=path,
    )


def refused_hard_link(path: Path | str, links: int) -> StateDamaged:
    return StateDamaged(
        f"{os.fspath(path)} is a hard link ({links} names); refusing to write through it",
        hint="nothing under the state root is ever a link; remove it",
        path=path,
    )


def lstat(path: Path | str) -> os.stat_result:
    """The entry at `path` itself (a link is reported as a link), reached link-safely."""
    parent, name = open_parent(path)
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)


def unlink(path: Path | str) -> None:
    """Remove the name (a link is removed, never its target)."""
    parent, name = open_parent(path)
    try:
        os.unlink(name, dir_fd=parent)
    finally:
        os.close(parent)


def rmdir(path: Path | str) -> None:
    """Remove an empty directory (OSError when it is not empty), by its name in its
    parent, reached link-safely."""
    parent, name = open_parent(path)
    try:
        os.rmdir(name, dir_fd=parent)
    finally:
        os.close(parent)


def rename(src: Path | str, dst: Path | str) -> None:
    """Rename relative to both directories' descriptors (neither reached through a link)."""
    src_dir, src_name = open_parent(src)
    try:
        dst_dir, dst_name = open_parent(dst)
        try:
            os.rename(src_name, dst_name, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        finally:
            os.close(dst_dir)
    finally:
        os.close(src_dir)


def rmtree(path: Path | str) -> None:
    """Delete a tree: from its real parent directory's descriptor, never through a link
    (a link at `path` itself is removed as a name)."""
    import shutil  # only when something is deleted

    parent, name = open_parent(path)
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            shutil.rmtree(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    finally:
        os.close(parent)


@contextlib.contextmanager
def scandir(path: Path | str) -> Iterator[tuple[int, list[os.DirEntry[str]]]]:
    """The entries of a directory reached link-safely, with its descriptor (for
    `dir_fd=` operations on them)."""
    fd = open_dir(path)
    try:
        with os.scandir(fd) as entries:
            listed = list(entries)
        yield fd, listed
    finally:
        os.close(fd)


def subdirs(path: Path | str) -> list[str]:
    """The names of the real directories in `path` (reached link-safely; [] when it is
    missing, StateDamaged when it is a link or not a directory)."""
    try:
        with scandir(path) as (_, entries):
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def fsync_dir(path: Path | str) -> None:
    fd = open_dir(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

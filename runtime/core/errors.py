"""Errors a user can act on.

Every failure caused by input (a malformed recipe, an unknown run, a refused kill) is an
`ActorsError`: the CLI prints its one-line message and exits 2 without a traceback, and
nothing has been written by the time it is raised. Anything else is a bug.
"""

from __future__ import annotations

import errno as _errno
import os


class ActorsError(Exception):
    """A problem the caller can fix; `str(err)` is one line that says what and how."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = _one_line(message)
        self.hint = None if hint is None else _one_line(hint)
        super().__init__(self.message if self.hint is None else f"{self.message}; {self.hint}")


def _one_line(text: object) -> str:
    """`text` as one inert line: a message often quotes what the caller typed or a file
    held (a parameter, a host, a path, a recipe name), and a newline there would forge a
    second `actors: ...` line, an escape act on the terminal or a model's context. Every
    control and invisible character is escaped (`\\n`, `\\x1b`), whatever the output is;
    plain text (nearly every message) is returned without importing the sanitiser."""
    text = text if isinstance(text, str) else str(text)
    if text.isascii() and text.isprintable():
        return text
    from runtime.core.terminal import cell

    return cell(text)


class BadInput(ActorsError):
    """A value, address, recipe or option is malformed."""


class NotFound(ActorsError):
    """A run, recipe or session named by the caller does not exist."""


class Conflict(ActorsError):
    """The request clashes with current state (an id in use, a run already finished)."""


class Refused(ActorsError):
    """Ownership or process identity does not allow the action."""


class StateDamaged(ActorsError):
    """A state file exists but cannot be read; the data is kept for inspection.

    `path` names the damaged file when it is known, so a view of many runs can show
    `(damaged: FILE)` for the one run and go on with the others."""

    def __init__(self, message: str, *, hint: str | None = None, path: object = None) -> None:
        super().__init__(message, hint=hint)
        self.path = None if path is None else str(path)


class ResourceError(ActorsError):
    """The machine ran out of something the user can give back: disk space, a writable
    file system, descriptors, memory, inotify instances. Not a bug: the line names the
    resource and the fix, and the CLI exits 2 like any other user-fixable error."""


RESOURCE_FIXES: dict[int, str] = {
    _errno.ENOSPC: "free space on that file system (or point ACTORS_HOME elsewhere)",
    _errno.EDQUOT: "free space or raise your disk quota",
    _errno.EROFS: "remount it read-write, or point ACTORS_HOME at a writable directory",
    _errno.EMFILE: "raise the open-file limit (`ulimit -n`) or close descriptors",
    _errno.ENFILE: "the system's file table is full: raise fs.file-max or stop programs",
    _errno.ENOMEM: "free memory (or raise the process's memory limit)",
    _errno.EACCES: "check the permissions of that path (the state root must be yours)",
    _errno.EPERM: "check the permissions of that path (the state root must be yours)",
    _errno.EIO: "the device reported an I/O error: check the disk",
}
"""Environment errors by errno, each with what the user can do about it."""

TRANSIENT = frozenset(
    {_errno.ENOSPC, _errno.EDQUOT, _errno.EROFS, _errno.EMFILE, _errno.ENFILE, _errno.ENOMEM}
)
"""Exhaustion that may pass on its own (space freed, descriptors closed, a remount): a
writer whose outcome would otherwise be lost (a runner ending its run) waits and retries."""


def os_errno(exc: BaseException | None) -> int | None:
    """The errno behind `exc`: its own, or that of the OSError it was raised from."""
    for _ in range(8):
        if exc is None:
            return None
        if isinstance(exc, OSError) and exc.errno is not None:
            return int(exc.errno)
        exc = exc.__cause__
    return None


class OutputLost(ResourceError):
    """The command's own output (stdout) could not be written: a full disk behind a
    redirection, /dev/full, a broken device. Whatever depended on the output being read
    (follow-ups marked read) has not happened."""


def resource_error(exc: BaseException, where: str | None = None) -> ResourceError | None:
    """`exc` as one user-facing line when the environment caused it (a full or read-only
    disk, no descriptors or memory left), else None (a bug; input errors are ActorsErrors
    already). `where` names the place when the error itself does not (the state root)."""
    if isinstance(exc, ResourceError):
        return exc
    if isinstance(exc, MemoryError) or _no_memory_to_load(exc):
        return ResourceError("out of memory", hint=RESOURCE_FIXES[_errno.ENOMEM])
    if isinstance(exc, ActorsError):
        return None
    code = os_errno(exc)
    if code is None or code not in RESOURCE_FIXES:
        return None
    name = getattr(exc, "filename", None)
    shown = os.fsdecode(name) if isinstance(name, str | bytes) else None
    if shown is not None and where is not None and not os.path.isabs(shown):
        shown = f"{shown} (under {where})"  # a name relative to a directory descriptor
    place = shown or where
    what = os.strerror(code)
    return ResourceError(f"{place}: {what}" if place else what, hint=RESOURCE_FIXES[code])


def _no_memory_to_load(exc: BaseException) -> bool:
    """An import whose shared library could not be mapped (the dynamic loader reports
    ENOMEM as text only)."""
    text = str(exc)
    return isinstance(exc, ImportError) and (
        "failed to map segment" in text or "Cannot allocate memory" in text
    )


def log_exception(exc: BaseException) -> None:
    """The traceback of `exc` on fd 2 (a runner's runner.log), written unbuffered: a disk
    that takes nothing more loses the text, never the caller (a runner still ending its
    run), and leaves no half-written buffer to fail again at exit."""
    import traceback  # deferred: ~4 ms of every runner's start (linecache, tokenize)

    text = "".join(traceback.format_exception(exc))
    try:
        os.write(2, text.encode(errors="replace"))
    except OSError:
        pass

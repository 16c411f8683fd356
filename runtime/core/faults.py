"""Named fault points for the reliability tests (tests/reliability/).

Write sequences call `pause_point("files.append.before_fsync")` between their steps.

- `$ACTORS_PAUSE_AT` names a point (or is a comma list of them): on reaching it the
  process writes `<pid> <point>` as one line to the barrier `$ACTORS_PAUSE_FIFO` (a FIFO
  the test reads, or a plain file), then stops itself with SIGSTOP, so the test can
  SIGKILL it at exactly that step, or SIGCONT it to let it go on. Each point pauses once
  per process.
- `$ACTORS_FAIL_AT` names points that raise `OSError(ENOSPC)` every time they are
  reached (a full disk, where no small file system can be mounted for the test).

Unset (always, outside tests), the environment is read once at import (through
runtime.core.config, which names these variables) and every call is one global lookup
and a return: no syscall, no allocation, no import beyond os.
"""

from __future__ import annotations

import os

from runtime.core import config

_PAUSE = config.names(config.PAUSE_AT)
_FAIL = config.names(config.FAIL_AT)
ARMED = bool(_PAUSE or _FAIL)
_fired: set[str] = set()


def pause_point(name: str) -> None:
    """Pause (or fail) here if a test asked to; free otherwise."""
    if ARMED:
        _reached(name)


def _reached(name: str) -> None:
    if name in _FAIL:
        import errno

        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected at {name})")
    if name not in _PAUSE or name in _fired:
        return
    import signal

    _fired.add(name)
    barrier = config.text(config.PAUSE_FIFO)
    if barrier:
        # opening a FIFO blocks until the test opens it for reading: the rendezvous
        fd = os.open(barrier, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {name}\n".encode())
        finally:
            os.close(fd)
    os.kill(os.getpid(), signal.SIGSTOP)

"""A session's two lock files, named once, and the timed hold a boundary hook takes.

`.inbox.lock` serialises inbox appends and drains (`SessionInbox`); `.deliver.lock` lets
one process at a time walk the session's deliveries (`DeliveryRunner`). A hook that hands
follow-ups over at a turn boundary takes both, in the runner's order, so that no delivery
pass, `actors inbox read` or racing hook takes the same entries; unlike the runner it
must never hang on them (a hook runs in front of a prompt or a tool call), hence the
timed variant here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INBOX_LOCK = ".inbox.lock"
DELIVER_LOCK = ".deliver.lock"


@contextlib.contextmanager
def hand_over_locks(session_dir: Path, wait_s: float) -> Iterator[None]:
    """Hold the session's delivery lock, then its inbox lock (the order the runner takes
    them), each within `wait_s`, else TimeoutError."""
    with (
        flock_within(session_dir / DELIVER_LOCK, wait_s),
        flock_within(session_dir / INBOX_LOCK, wait_s),
    ):
        yield


@contextlib.contextmanager
def flock_within(path: Path, seconds: float) -> Iterator[None]:
    """An exclusive flock on `path`, or TimeoutError after `seconds` (a hook must not
    hang on a lock some other process holds too long)."""

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{path} stayed locked for {seconds}s")

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        yield
    finally:
        os.close(fd)

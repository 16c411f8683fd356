"""Which runs and sessions a batch of file events touched, with a watch on every
directory that matters under `runs/` and `sessions/`.

Each run directory, and those beneath it (a room's timeline, a branch's inbox), gets an
inotify watch; a new run arrives as one directory renamed into `runs/` with its
subdirectories in it, so a new directory is watched along with everything under it. The
doorbell, guardian, capture and body directories are left out: FIFOs and per-command
logs that a page never shows. When the kernel's queue overflowed, the caller re-lists.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from runtime.core.inotify import (
    IN_CREATE,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    Event,
    Inotify,
)

SKIPPED = frozenset({"doorbells", "guardians", "followers", "captures", "bodies"})


@dataclass
class Batch:
    touched: set[str] = field(default_factory=set)
    """Run ids whose files changed."""
    sessions: bool = False
    overflow: bool = False
    """Events were lost: re-read everything."""


class StateWatch:
    def __init__(self, inotify: Inotify, runs: str, sessions: str) -> None:
        self.inotify = inotify
        self.runs = runs.rstrip("/")
        self.sessions = sessions.rstrip("/")
        self._dirs: dict[int, str] = {}
        self._warned = False

    def start(self) -> None:
        """Watch both trees (again, after an overflow: a watch already set is kept)."""
        self._add_tree(self.runs)
        self._add_tree(self.sessions)

    def _add_tree(self, top: str) -> None:
        try:
            wd = self.inotify.add(top)
        except OSError as exc:  # ENOSPC: fs.inotify.max_user_watches reached
            if not self._warned:
                self._warned = True
                sys.stderr.write(
                    f"actors dashboard: {exc.strerror}; runs beyond it update on a reload "
                    "(raise fs.inotify.max_user_watches, or archive old runs)\n"
                )
            return
        if wd is None:
            return
        self._dirs[wd] = top
        try:
            entries = list(os.scandir(top))
        except OSError:
            return
        for entry in entries:
            if entry.name not in SKIPPED and entry.is_dir(follow_symlinks=False):
                self._add_tree(entry.path)

    def apply(self, events: list[Event]) -> Batch:
        batch = Batch()
        for event in events:
            if event.mask & IN_Q_OVERFLOW:
                batch.overflow = True
                continue
            if event.mask & IN_IGNORED:  # the directory is gone
                self._dirs.pop(event.wd, None)
                continue
            base = self._dirs.get(event.wd)
            if base is None:
                continue
            path = f"{base}/{event.name}" if event.name else base
            if (
                event.mask & IN_ISDIR
                and event.mask & (IN_CREATE | IN_MOVED_TO)
                and event.name not in SKIPPED
            ):
                self._add_tree(path)
            if event.name.endswith(".lock"):
                continue
            self._classify(path, batch)
        return batch

    def _classify(self, path: str, batch: Batch) -> None:
        if path.startswith(self.runs + "/"):
            batch.touched.add(path[len(self.runs) + 1 :].split("/", 1)[0])
        elif path == self.sessions or path.startswith(self.sessions + "/"):
            batch.sessions = True

"""One durable inbox journal, written once: its locks, the ringing append, the read
barrier, state lines, and the fold into current entries.

A run's mailbox (`mailbox.Mailbox`: claims with leases, `handled` / `failed`) and a
session's follow-up inbox (runtime.delivery.sessions.SessionInbox: one entry per
delivery id, `taken` / `read` / `moved`) are both this journal, each with its own policy
on top. The mechanics they share:

- **A new entry** is appended in one critical section under the journal's own `flock`:
  ring the doorbells, write the whole line, fsync, unlock (`append_ringing`). A process
  killed anywhere in it either appended nothing or has already rung; a woken reader
  waits for the same lock, so it never reads a line before it is whole and durable
  (docs/messaging.md, Doorbells).
- **A decision** that reads the journal and then writes to it (a claim, a deduplicated
  append, a take, a move) holds the sidecar lock (`deciding`), so two deciders never
  act on the same fold: an entry a session has already is never appended again, since
  every one of its appenders decides under this lock. Reading behind the **read barrier** (`reading`) holds the
  sidecar and then the journal's flock: every append that rang a reader before has
  ended by then (written and fsynced, or its writer died and the kernel dropped its
  lock).
- **Every later change** is a batch of state lines appended as one write
  (`append_changes`): a reader folds all of them or none.
- **The fold**: the first line of an id that the inbox admits (one with an envelope)
  makes the entry, later lines without an envelope update its fields; read
  incrementally, a bounded step at a time, and again from the start when a compaction
  replaced the file. Entries whose state is open are also kept in arrival order apart
  (`_open`), so a scan for work never walks the settled history.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from runtime.core.faults import pause_point
from runtime.store.appends import (
    append_line,
    encode_line,
    lock_current,
    locked,
    unlock,
    write_locked,
)
from runtime.store.reads import read_jsonl
from runtime.store.writes import disk_error

if TYPE_CHECKING:
    from runtime.store.appends import Compactor

EntryT = TypeVar("EntryT", bound=Mapping[str, Any])

READ_STEP = 1 << 20
"""How much of an inbox a fold reads at a time: its memory is this plus what it keeps."""


class DurableInbox(Generic[EntryT]):
    """One inbox journal (`inbox`), the doorbell directory its appends ring (`doorbells`)
    and the sidecar lock its deciders hold (`lock_path`); keeps an incremental fold.

    A subclass sets its policy: `compactor` (None: the journal is never compacted),
    `open_states` (the states a scan for work looks at), `admits` (which line makes an
    entry) and the names of its fault points."""

    compactor: Compactor | None = None
    open_states: frozenset[str] = frozenset()
    after_ring = "inbox.append.after_ring"
    """Fault point: doorbells rung, journal locked, nothing written yet."""
    after_write = "inbox.append.after_write"
    """Fault point: the line written whole, journal still locked, not yet fsynced."""

    def __init__(self, inbox: Path, doorbells: Path, lock_path: Path) -> None:
        self.inbox, self.doorbells, self.lock_path = inbox, doorbells, lock_path
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._entries: dict[str, EntryT] = {}
        self._open: dict[str, None] = {}
        """Ids of entries in an open state, oldest first (what a scan for work walks)."""

    # -- writing -----------------------------------------------------------------------
    def append_ringing(
        self, data: bytes, *, ring: bool = True, kind: str | None = None, fsync: bool = True
    ) -> None:
        """Under the journal's flock: ring the doorbells (with `ring`; those that want a
        `kind` message, every one for None), append `data` (whole lines), fsync, unlock.

        The ring comes first and inside the lock, so no kill point separates a written
        line from its wake: killed before the write, nothing was appended (and the
        caller got no success); killed after it, the waiters were already rung and each
        reads behind this lock, which the kernel releases with the dead writer. The
        fsync is inside too, so a woken reader never reads a line a power loss could
        still take back (durable before readable).
        """
        fd = lock_current(self.inbox)
        try:
            try:
                if ring:
                    # deferred for start-up cost: a session inbox's readers (the hooks in
                    # front of every prompt) never ring, and need not load the doorbells
                    from runtime.messaging.doorbells import ring as ring_doorbells

                    ring_doorbells(self.doorbells, kind)
                    pause_point(self.after_ring)
                write_locked(fd, self.inbox, data, self.compactor)
                pause_point(self.after_write)
                if fsync:
                    _sync(fd, self.inbox)
            finally:
                unlock(fd)
        finally:
            os.close(fd)

    def append_changes(
        self, lines: Iterable[Mapping[str, Any]], *, fsync: bool = False, fd: int | None = None
    ) -> None:
        """State lines (each naming the entry it changes by `id`) appended as one write,
        so a reader folds all of them or none. `fd` is the journal's locked descriptor
        of a caller behind `reading`; without it the journal's flock is taken for the
        write alone (and a requested fsync follows the unlock, so writers group-commit)."""
        data = b"".join(encode_line(line) for line in lines)
        if not data:
            return
        if fd is None:
            append_line(self.inbox, data, fsync=fsync, compactor=self.compactor)
            return
        write_locked(fd, self.inbox, data, self.compactor)
        if fsync:
            _sync(fd, self.inbox)

    # -- locks ---------------------------------------------------------------------------
    def deciding(self) -> contextlib.AbstractContextManager[None]:
        """The sidecar lock, for a step that reads the fold and then writes by it."""
        return locked(self.lock_path)

    @contextlib.contextmanager
    def reading(self) -> Iterator[int | None]:
        """Behind the read barrier: the sidecar lock, then the journal's own flock, held
        until the block ends. Every append that rang a reader before this began has
        ended by then. Yields the journal's locked descriptor (for `append_changes`),
        or None when there is no journal yet (nothing was ever appended: none is made)."""
        with self.deciding():
            if not os.path.lexists(self.inbox):
                yield None
                return
            fd = lock_current(self.inbox)
            try:
                yield fd
            finally:
                unlock(fd)
                os.close(fd)

    def read_barrier(self) -> None:
        """Return once no append that may have rung before this call is in progress. In
        a directory that does not exist yet nothing was appended: nothing is made."""
        if os.path.isdir(self.lock_path.parent):
            with self.reading():
                pass

    # -- the fold ------------------------------------------------------------------------
    def admits(self, record: dict[str, Any]) -> bool:
        """Whether a line that names no entry yet makes one (here: it carries an envelope
        object; a foreign or damaged line does not)."""
        return isinstance(record.get("envelope"), dict)

    def refresh(self) -> dict[str, EntryT]:
        """Fold lines appended since the last call into the current entry states (all
        again from the start when the journal was compacted since), a bounded step at a
        time."""
        while True:
            chunk = read_jsonl(
                self.inbox, offset=self._offset, identity=self._identity, limit=READ_STEP
            )
            if chunk.reset:
                self._entries.clear()
                self._open.clear()
            self._offset, self._identity = chunk.next_offset, chunk.identity
            self._fold(chunk.records)
            if not chunk.more:
                return self._entries

    def _fold(self, records: list[dict[str, Any]]) -> None:
        # every name the loop uses is local (the fold of a whole session inbox runs for
        # each append); the records are freshly parsed, so they are kept, not copied
        entries: dict[str, Any] = self._entries
        open_ids, open_states, admits = self._open, self.open_states, self.admits
        for record in records:
            ident = record.get("id")
            if not isinstance(ident, str):
                continue
            current = entries.get(ident)
            if current is None:
                if not admits(record):
                    continue  # and its state lines are skipped the same way
                entries[ident] = current = record
            elif "envelope" not in record:
                current.update(record)  # a state line
            else:
                continue  # a second entry line of an id: the first one stands
            if current.get("state") in open_states:
                open_ids[ident] = None  # (an id already there keeps its place)
            else:
                open_ids.pop(ident, None)

    def entries(self) -> list[EntryT]:
        """Current state of every entry, in arrival order."""
        return list(self.refresh().values())


def _sync(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:  # the line is written whole; only its sync failed
        raise disk_error("sync", path, exc) from exc

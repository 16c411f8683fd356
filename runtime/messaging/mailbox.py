"""Durable mailboxes: append first, ring the doorbell second, claim exclusively.

An inbox is a JSONL journal. A message enters as one `queued` entry line (fsync'd before
anything else happens); every later change (`sent`, `claimed`, `handled`, `failed`,
`queued` again after a dead consumer's lease) is appended as a small state line, and the
current state is the fold of the lines. Claims happen under an exclusive flock, so two
consumers never get the same entry; who holds a claim and when it ends is `claims`.

Waking is advisory and never carries data (`doorbells`): after the durable append the
sender rings every consumer's doorbell FIFO and writes a line to wake.jsonl for observers
that tail files. Consumers sleep on their FIFO and also re-check on a slow timer, so a
missed or coalesced wake delays but never loses a message, and one wake drains
everything queued.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime.core.faults import pause_point
from runtime.core.ids import new_id, now_iso
from runtime.messaging.claims import CLAIMABLE, LEASE_S, claim_line, me, settle
from runtime.messaging.doorbells import RECONCILE_INTERVAL_S, doorbell, ring
from runtime.store.appends import append_jsonl, append_line, encode_line, locked
from runtime.store.journals import INBOX, LOG, OPEN_STATES
from runtime.store.layout import FIFO_COMMITS
from runtime.store.reads import read_jsonl
from runtime.store.writes import DiskWriteError, ensure_dir

if TYPE_CHECKING:
    # Type-only: a TypedDict class body costs ~0.5 ms at import (each postponed
    # annotation is compiled), and `actors message` imports this module.
    from runtime.messaging.entries import MailboxEntry
    from runtime.messaging.envelope import Envelope


READ_STEP = 1 << 20
"""How much of an inbox a fold reads at a time: its memory is this plus what it keeps."""


class Mailbox:
    """One inbox journal plus its doorbell directory; keeps an incremental fold.

    With `types`, the fold keeps only entries of those types (and their state lines): a
    consumer that wants a few types (the runner: `control.*`) holds no copy of the rest,
    however many of them wait unread."""

    def __init__(
        self,
        inbox: Path,
        doorbells: Path,
        wake_log: Path | None = None,
        *,
        types: tuple[str, ...] | None = None,
    ) -> None:
        self.inbox, self.doorbells, self.wake_log = inbox, doorbells, wake_log
        self.types = types
        self.commits = inbox.with_name(FIFO_COMMITS)
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._entries: dict[str, MailboxEntry] = {}
        self._open: dict[str, None] = {}
        """Ids of entries that are not settled, oldest first (what a claim scans)."""
        self._bell: int | None = None
        self._bell_cm: Any = None

    @property
    def lock_path(self) -> Path:
        return self.inbox.with_name(f".{self.inbox.name}.lock")

    # -- sending -----------------------------------------------------------------------
    def deliver(
        self,
        envelope: Envelope,
        *,
        fsync: bool = True,
        instance: str | None = None,
        state: str = "queued",
    ) -> MailboxEntry:
        """Durably append a message, then ring every doorbell. Returns the entry."""
        entry: MailboxEntry = {
            "id": envelope["id"],
            "state": state,
            "queued_at": now_iso(),
            "run_instance_id": instance,
            "envelope": envelope,
        }
        if state == "sending":  # who may still write it to the FIFO (see `claim`)
            entry["sending_by"] = me()
        append_jsonl(self.inbox, entry, fsync=fsync, compactor=INBOX)
        pause_point("mailbox.deliver.before_ring")
        if state == "queued":
            self.wake(envelope)
        return entry

    def wake(self, envelope: Envelope) -> None:
        """Poke every interested consumer's FIFO, then record the advisory doorbell line.

        The message is already durable: a wake line that cannot be written (a full disk)
        must not make the sender report a failure it would then retry into a duplicate.
        """
        ring(self.doorbells, str(envelope.get("type")))
        if self.wake_log is not None:
            with contextlib.suppress(DiskWriteError):
                append_jsonl(
                    self.wake_log,
                    compactor=LOG,
                    record={
                        "id": new_id(),
                        "ts": now_iso(),
                        "reason": "message",
                        "actor": envelope["to"],
                        "metadata": {"inbox_id": envelope["id"], "type": envelope["type"]},
                    },
                )

    def mark(self, entry_id: str, state: str, **fields: Any) -> None:
        append_jsonl(
            self.inbox,
            {"id": entry_id, "state": state, f"{state}_at": now_iso(), **fields},
            compactor=INBOX,
        )

    # -- the FIFO fast path (see docs/messaging.md, The FIFO fast path) ------------------
    def commit_fifo(self, entry_id: str) -> None:
        """Record, without the journal's lock, that this live sender is about to write
        the `sending` entry to the FIFO: from now on its death settles the entry `sent`
        (it may be in the FIFO), never `queued` (which could deliver it twice)."""
        ensure_dir(self.commits)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(self.commits / entry_id, flags, 0o600))

    def uncommit_fifo(self, entry_id: str) -> None:
        """The write is settled (marked `sent`, or failed before `queued` is marked)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.commits / entry_id)

    def _committed(self, entry_id: str) -> bool:
        return os.path.lexists(self.commits / entry_id)

    # -- reading -----------------------------------------------------------------------
    def refresh(self) -> dict[str, MailboxEntry]:
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
        for record in records:
            ident = record.get("id")
            if not isinstance(ident, str):
                continue
            current = self._entries.get(ident)
            if current is None:
                # a foreign or damaged line whose envelope is not an object is not an entry
                envelope = record.get("envelope")
                if not (isinstance(envelope, dict) and isinstance(envelope.get("type"), str)):
                    continue
                if self.types is not None and envelope["type"] not in self.types:
                    continue  # not wanted here: its state lines are skipped the same way
                current = self._entries[ident] = cast("MailboxEntry", dict(record))
            elif "envelope" not in record:
                current.update(cast("MailboxEntry", record))  # a state line: no envelope
            else:
                continue
            if current.get("state") in OPEN_STATES:
                self._open.setdefault(ident)
            else:
                self._open.pop(ident, None)

    def entries(self) -> list[MailboxEntry]:
        return list(self.refresh().values())

    # -- consuming ---------------------------------------------------------------------
    def claim(
        self,
        *,
        types: tuple[str, ...] | None = None,
        exclude_types: tuple[str, ...] = (),
        limit: int = 1,
        consumer: str = "recv",
        lease_s: float = LEASE_S,
    ) -> list[MailboxEntry]:
        """Exclusively claim up to `limit` open entries (oldest first)."""
        ensure_dir(self.inbox.parent)
        claimed: list[MailboxEntry] = []
        with locked(self.lock_path):
            now = time.time()
            lines = []
            done_commits: list[str] = []
            entries = self.refresh()
            for ident in self._open:
                if len(claimed) >= limit:
                    break  # later entries are newer; a stale claim among them waits its turn
                entry = entries[ident]
                state, settled = settle(entry, now, self._committed)
                if settled is not None:
                    lines.append(settled)
                    if state == "sent":
                        done_commits.append(ident)
                if state not in CLAIMABLE:
                    continue
                kind = str(entry["envelope"].get("type", ""))
                if types is not None and kind not in types:
                    continue
                if kind in exclude_types:
                    continue
                lines.append(claim_line(entry, consumer, lease_s))
                claimed.append(entry)
            if lines:
                append_line(
                    self.inbox, b"".join(encode_line(line) for line in lines), compactor=INBOX
                )
            for ident in done_commits:  # settled `sent` in the journal: the marker is spent
                self.uncommit_fifo(ident)
        if claimed:
            pause_point("mailbox.claim.after_lease")
        self.refresh()
        return [self._entries[e["id"]] for e in claimed]

    def wait_claim(self, *, timeout: float | None, **claim_args: Any) -> list[MailboxEntry]:
        """Block (on a doorbell FIFO, with a reconcile timer) until something is claimed.

        The doorbell is created on first use and kept for the life of this object, so a
        consumer looping on `wait_claim` pays for the FIFO once, not per message.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._doorbell()
        while True:
            got = self.claim(**claim_args)
            if got:
                return got
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return []
            step = (
                RECONCILE_INTERVAL_S if remaining is None else min(RECONCILE_INTERVAL_S, remaining)
            )
            ready, _, _ = _select([fd], step)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)

    def _doorbell(self) -> int:
        if self._bell is None:
            self._bell_cm = doorbell(self.doorbells)
            self._bell = self._bell_cm.__enter__()
            import atexit  # only a waiting consumer registers a clean-up

            atexit.register(self.close)
        return self._bell

    def close(self) -> None:
        """Remove this consumer's doorbell (also done at interpreter exit)."""
        if self._bell_cm is not None:
            cm, self._bell_cm, self._bell = self._bell_cm, None, None
            cm.__exit__(None, None, None)


_boxes: dict[Path, Mailbox] = {}


def mailbox_for(inbox: Path, doorbells: Path, wake_log: Path | None = None) -> Mailbox:
    """The process-wide Mailbox of an inbox, so repeated reads stay incremental."""
    box = _boxes.get(inbox)
    if box is None:
        box = _boxes[inbox] = Mailbox(inbox, doorbells, wake_log)
    return box


def _select(fds: list[int], timeout: float) -> tuple[list[int], list[int], list[int]]:
    """select() for a waiting consumer; imported here, since senders never wait."""
    import select

    return select.select(fds, [], [], timeout)

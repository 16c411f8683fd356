"""Durable mailboxes: a run's inbox journal, claimed exclusively by its consumers.

A run's (or a branch's) inbox is a durable inbox journal (`durable_inbox`: the ringing
append, the read barrier, state lines, the fold). A message enters as one `queued`
entry line (fsync'd before the journal's lock is released); every later change (`sent`,
`claimed`, `handled`, `failed`, `queued` again after a dead consumer's claim) is
appended as a small state line, and the current state is the fold of the lines. What
this module adds is the mailbox's policy: claims happen under the exclusive sidecar
flock, so two consumers never get the same entry (who holds a claim and when it ends is
`claims`), the FIFO fast path's commit markers, and a consumer's wait.

Waking never carries data (`doorbells`) and needs no timer: the sender takes the
journal's flock, rings every consumer's doorbell FIFO, appends and fsyncs, then unlocks;
a consumer reads (claims) behind that same flock. A woken consumer therefore blocks
until the sender's append is whole and durable, or until the kernel drops a killed
sender's lock; and a consumer that armed its doorbell after a sender rang reads after
that sender's unlock. No kill point leaves a written message without a wake
(docs/messaging.md, Doorbells). One wake drains everything queued.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.faults import pause_point
from runtime.core.ids import new_id, now_iso
from runtime.messaging.doorbells import doorbell
from runtime.messaging.durable_inbox import DurableInbox
from runtime.store.appends import append_jsonl, encode_line
from runtime.store.journals import INBOX, LOG, OPEN_STATES
from runtime.store.layout import FIFO_COMMITS
from runtime.store.writes import DiskWriteError, ensure_dir

if TYPE_CHECKING:
    # Type-only: a TypedDict class body costs ~0.5 ms at import (each postponed
    # annotation is compiled), and `actors message` imports this module.
    from runtime.messaging.entries import InboxLine, MailboxEntry
    from runtime.messaging.envelope import Envelope


class Mailbox(DurableInbox["MailboxEntry"]):
    """A run's or a branch's inbox: the durable journal (`DurableInbox`) plus claims.

    Its sidecar lock (`.inbox.jsonl.lock`) is the claim lock: senders never take it,
    they append under the journal's flock alone. With `types`, the fold keeps only
    entries of those types (and their state lines): a consumer that wants a few types
    (the runner: `control.*`) holds no copy of the rest, however many of them wait
    unread."""

    compactor = INBOX
    open_states = OPEN_STATES
    after_ring = "mailbox.append.after_ring"
    after_write = "mailbox.append.after_write"

    def __init__(
        self,
        inbox: Path,
        doorbells: Path,
        wake_log: Path | None = None,
        *,
        types: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(inbox, doorbells, inbox.with_name(f".{inbox.name}.lock"))
        self.wake_log = wake_log
        self.types = types
        self.commits = inbox.with_name(FIFO_COMMITS)
        self._bell: int | None = None
        self._bell_cm: Any = None

    # -- sending -----------------------------------------------------------------------
    def deliver(
        self,
        envelope: Envelope,
        *,
        fsync: bool = True,
        instance: str | None = None,
        state: str = "queued",
    ) -> MailboxEntry:
        """Ring the doorbells and durably append a message, in one critical section
        (`append_ringing`; a `sending` entry rings none: the FIFO fast path wakes its
        reader); then the advisory wake line. Returns the entry."""
        entry: MailboxEntry = {
            "id": envelope["id"],
            "state": state,
            "queued_at": now_iso(),
            "run_instance_id": instance,
            "envelope": envelope,
        }
        if state == "sending":  # who may still write it to the FIFO (see `claim`)
            from runtime.messaging.claims import me  # consumers' rules: a send skips them

            entry["sending_by"] = me()
        queued = state == "queued"
        self.append_ringing(
            encode_line(entry), ring=queued, kind=str(envelope.get("type")), fsync=fsync
        )
        if queued:
            self.log_wake(envelope)
        return entry

    def log_wake(self, envelope: Envelope) -> None:
        """Record the advisory doorbell line in wake.jsonl (for observers that tail files).

        The message is already durable: a wake line that cannot be written (a full disk)
        must not make the sender report a failure it would then retry into a duplicate.
        """
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
        """One state line: `state`, stamped `<state>_at`, plus `fields`."""
        self.append_changes([{"id": entry_id, "state": state, f"{state}_at": now_iso(), **fields}])

    def requeue(self, entry_id: str, envelope: Envelope) -> None:
        """Mark a `sending` entry `queued` and ring for it, in one critical section (the
        FIFO fast path's fallback; see `append_ringing`)."""
        line = encode_line({"id": entry_id, "state": "queued", "queued_at": now_iso()})
        self.append_ringing(line, kind=str(envelope.get("type")), fsync=False)
        self.log_wake(envelope)

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
    def admits(self, record: dict[str, Any]) -> bool:
        """An entry line with an envelope of a type, and one of `types` when given (a
        type not wanted here is skipped with its state lines)."""
        envelope = record.get("envelope")
        if not (isinstance(envelope, dict) and isinstance(envelope.get("type"), str)):
            return False
        return self.types is None or envelope["type"] in self.types

    # -- consuming ---------------------------------------------------------------------
    def claim(
        self,
        *,
        types: tuple[str, ...] | None = None,
        exclude_types: tuple[str, ...] = (),
        limit: int = 1,
        consumer: str = "recv",
        lease_s: float | None = None,
    ) -> list[MailboxEntry]:
        """Exclusively claim up to `limit` open entries (oldest first), each for `lease_s`
        seconds (default `claims.LEASE_S`)."""
        ensure_dir(self.inbox.parent)
        claimed: list[MailboxEntry] = []
        if not os.path.lexists(self.inbox):
            # nothing sent yet: a sender creates the journal before it rings, so one that
            # starts now rings this consumer's (already armed) doorbell
            return claimed
        # behind the read barrier (the claim lock, then the senders' flock): a sender that
        # rang before this claim has finished its append (or died) by the time this fold
        # reads (see `append_ringing`)
        with self.reading() as fd:
            if fd is None:
                return claimed  # the journal went away (a prune) since the look above
            lines, done_commits = self._pick(
                claimed, types, exclude_types, limit, consumer, lease_s
            )
            self.append_changes(lines, fd=fd)
        for ident in done_commits:  # settled `sent` in the journal: the marker is spent
            self.uncommit_fifo(ident)
        if claimed:
            pause_point("mailbox.claim.after_lease")
        self.refresh()
        return [self._entries[e["id"]] for e in claimed]

    def _pick(
        self,
        claimed: list[MailboxEntry],
        types: tuple[str, ...] | None,
        exclude_types: tuple[str, ...],
        limit: int,
        consumer: str,
        lease_s: float | None,
    ) -> tuple[list[InboxLine], list[str]]:
        """Under the claim lock: the lines that settle stuck entries and claim up to
        `limit` open ones (appended to `claimed`), and the commit markers they spend."""
        # imported by consumers only: `message` never claims, and pays nothing for it
        from runtime.messaging.claims import CLAIMABLE, LEASE_S, claim_line, settle

        lease = LEASE_S if lease_s is None else lease_s
        now = time.time()
        lines: list[InboxLine] = []
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
            if state not in CLAIMABLE or not _wanted(entry, types, exclude_types):
                continue
            lines.append(claim_line(entry, consumer, lease))
            claimed.append(entry)
        return lines, done_commits

    def wait_claim(self, *, timeout: float | None, **claim_args: Any) -> list[MailboxEntry]:
        """Block until something is claimed (or `timeout` passes): asleep on this
        consumer's doorbell FIFO and on the pidfd of every other process holding an
        entry it wants, with no timer but the caller's timeout and a held claim's lease.

        The doorbell is armed before the first claim (so a sender that rings after it
        wakes it, and one that rang before it finished its append before this claim
        read) and kept for the life of this object, so a consumer looping on
        `wait_claim` pays for the FIFO once, not per message. A holder that dies (a
        consumer killed mid-claim, a fast-path sender killed mid-write) wakes the wait
        through its pidfd, and the next claim takes its entry back (`claims.settle`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self._doorbell()
        types = claim_args.get("types")
        exclude_types = claim_args.get("exclude_types", ())
        while True:
            got = self.claim(**claim_args)
            if got:
                return got
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return []
            held = [e for e in self._held_entries() if _wanted(e, types, exclude_types)]
            from runtime.messaging.claims import watch_holders  # (loaded by the claim)

            with watch_holders(held, time.time()) as (pidfds, due):
                if due is not None:
                    remaining = due if remaining is None else min(remaining, due)
                ready = _poll([fd, *pidfds], remaining)
            if fd in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)

    def _held_entries(self) -> list[MailboxEntry]:
        """Open entries someone else holds (`claimed`, or `sending` on the fast path)."""
        from runtime.messaging.claims import CLAIMABLE  # (loaded by the claim)

        return [e for i in self._open if (e := self._entries[i]).get("state") not in CLAIMABLE]

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


def _wanted(entry: MailboxEntry, types: tuple[str, ...] | None, exclude: tuple[str, ...]) -> bool:
    kind = str(entry["envelope"].get("type", ""))
    return (types is None or kind in types) and kind not in exclude


def _poll(fds: list[int], timeout: float | None) -> set[int]:
    """The readable ones of `fds`, waiting at most `timeout` seconds (None: no limit).
    poll(), not select(): a descriptor past 1023 is fine. Imported here, since senders
    never wait."""
    import select

    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    wait_ms = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
    return {fd for fd, _event in poller.poll(wait_ms)}

"""Durable mailboxes: append first, ring the doorbell second, claim exclusively.

An inbox is a JSONL journal. A message enters as one `queued` entry line (fsync'd before
anything else happens); every later change (`sent`, `claimed`, `handled`, `failed`,
`queued` again after a dead consumer's lease) is appended as a small state line, and the
current state is the fold of the lines. Claims happen under an exclusive flock, so two
consumers never get the same entry; a claim records the consumer's pid and start ticks,
and is taken back when that process is gone or its lease has run out.

Waking is advisory and never carries data: after the durable append the sender writes
one byte into every consumer's doorbell FIFO (`doorbells/<pid>-<rand>.fifo`) and a line
to wake.jsonl for observers that tail files. Consumers sleep on their FIFO and also
re-check on a slow timer, so a missed or coalesced wake delays but never loses a message,
and one wake drains everything queued.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import select
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runtime.core import config
from runtime.core.faults import pause_point
from runtime.core.ids import new_id, now_iso, parse_iso
from runtime.core.process import read_stat
from runtime.store.files import (
    DiskWriteError,
    append_jsonl,
    append_line,
    encode_line,
    ensure_dir,
    locked,
    read_jsonl,
)
from runtime.store.journals import INBOX, LOG, OPEN_STATES

RECONCILE_INTERVAL_S = 1.0
"""Upper bound on how long a queued message can wait when every doorbell is missed."""
LEASE_S = config.seconds(config.LEASE_S)
"""How long a claim is exclusive while its holder lives (`$ACTORS_LEASE_S`, default 300 s)."""
CLAIMABLE = ("queued",)
SENDING_GRACE_S = 5.0
"""A `sending` entry that names no sender (written before senders were recorded) is
treated as queued once older than this."""


_my_identity: dict[str, Any] = {}


def _me() -> dict[str, Any]:
    """This process as a claim holder; read once per pid (a fork gets its own)."""
    pid = os.getpid()
    if _my_identity.get("pid") != pid:
        stat = read_stat(pid)
        _my_identity.clear()
        _my_identity.update(pid=pid, start_ticks=stat.start_ticks if stat else None)
    return dict(_my_identity)


def _sender_gone(entry: dict[str, Any], now: float) -> bool:
    """Whether a `sending` entry's FIFO write can no longer happen.

    Only the sender's death settles it: a sender that is merely slow (frozen, swapped
    out) still writes the envelope to the FIFO when it resumes, so handing the entry to
    `recv` as well would deliver it twice. Entries without a recorded sender fall back to
    their age.
    """
    sender = entry.get("sending_by")
    if isinstance(sender, dict):
        return not _holder_alive(sender)
    return _age_s(entry.get("queued_at"), now) > SENDING_GRACE_S


def _holder_alive(holder: Any) -> bool:
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return False
    stat = read_stat(holder["pid"])
    if stat is None or stat.state in ("Z", "X"):
        return False
    return holder.get("start_ticks") in (None, stat.start_ticks)


class Mailbox:
    """One inbox journal plus its doorbell directory; keeps an incremental fold."""

    def __init__(self, inbox: Path, doorbells: Path, wake_log: Path | None = None) -> None:
        self.inbox, self.doorbells, self.wake_log = inbox, doorbells, wake_log
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._entries: dict[str, dict[str, Any]] = {}
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
        envelope: dict[str, Any],
        *,
        fsync: bool = True,
        instance: str | None = None,
        state: str = "queued",
    ) -> dict[str, Any]:
        """Durably append a message, then ring every doorbell. Returns the entry."""
        entry = {
            "id": envelope["id"],
            "state": state,
            "queued_at": now_iso(),
            "run_instance_id": instance,
            "envelope": envelope,
        }
        if state == "sending":  # who may still write it to the FIFO (see `claim`)
            entry["sending_by"] = _me()
        append_jsonl(self.inbox, entry, fsync=fsync, compactor=INBOX)
        pause_point("mailbox.deliver.before_ring")
        if state == "queued":
            self.wake(envelope)
        return entry

    def wake(self, envelope: dict[str, Any]) -> None:
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

    # -- reading -----------------------------------------------------------------------
    def refresh(self) -> dict[str, dict[str, Any]]:
        """Fold lines appended since the last call into the current entry states (all
        again from the start when the journal was compacted since)."""
        chunk = read_jsonl(self.inbox, offset=self._offset, identity=self._identity)
        if chunk.reset:
            self._entries.clear()
            self._open.clear()
        self._offset, self._identity = chunk.next_offset, chunk.identity
        for record in chunk.records:
            ident = record.get("id")
            if not isinstance(ident, str):
                continue
            current = self._entries.get(ident)
            if current is None:
                # a foreign or damaged line whose envelope is not an object is not an entry
                envelope = record.get("envelope")
                if not (isinstance(envelope, dict) and isinstance(envelope.get("type"), str)):
                    continue
                current = self._entries[ident] = dict(record)
            elif "envelope" not in record:
                current.update(record)
            else:
                continue
            if current.get("state") in OPEN_STATES:
                self._open.setdefault(ident)
            else:
                self._open.pop(ident, None)
        return self._entries

    def entries(self) -> list[dict[str, Any]]:
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
    ) -> list[dict[str, Any]]:
        """Exclusively claim up to `limit` open entries (oldest first)."""
        ensure_dir(self.inbox.parent)
        claimed: list[dict[str, Any]] = []
        with locked(self.lock_path):
            now = time.time()
            lines = []
            entries = self.refresh()
            for ident in self._open:
                if len(claimed) >= limit:
                    break  # later entries are newer; a stale claim among them waits its turn
                entry = entries[ident]
                state = entry.get("state")
                if state == "sending" and _sender_gone(entry, now):
                    lines.append(
                        {
                            "id": entry["id"],
                            "state": "queued",
                            "queued_at": now_iso(),
                            "requeued": "sender vanished mid fast path",
                        }
                    )
                    state = "queued"
                if state == "claimed" and not self._claim_live(entry, now):
                    lines.append(
                        {
                            "id": entry["id"],
                            "state": "queued",
                            "queued_at": now_iso(),
                            "requeued": "claim holder gone or lease expired",
                        }
                    )
                    state = "queued"
                if state not in CLAIMABLE:
                    continue
                kind = str(entry["envelope"].get("type", ""))
                if types is not None and kind not in types:
                    continue
                if kind in exclude_types:
                    continue
                holder = {**_me(), "consumer": consumer}
                lines.append(
                    {
                        "id": entry["id"],
                        "state": "claimed",
                        "claimed_at": now_iso(),
                        "claimed_by": holder,
                        "lease_until": _iso_in(lease_s),
                    }
                )
                claimed.append(entry)
            if lines:
                append_line(
                    self.inbox, b"".join(encode_line(line) for line in lines), compactor=INBOX
                )
        if claimed:
            pause_point("mailbox.claim.after_lease")
        self.refresh()
        return [self._entries[e["id"]] for e in claimed]

    @staticmethod
    def _claim_live(entry: dict[str, Any], now: float) -> bool:
        if not _holder_alive(entry.get("claimed_by")):
            return False
        try:
            return parse_iso(str(entry.get("lease_until"))) > now
        except ValueError:
            return False

    def wait_claim(self, *, timeout: float | None, **claim_args: Any) -> list[dict[str, Any]]:
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
            ready, _, _ = select.select([fd], [], [], step)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)

    def _doorbell(self) -> int:
        if self._bell is None:
            self._bell_cm = doorbell(self.doorbells)
            self._bell = self._bell_cm.__enter__()
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


def _age_s(stamp: Any, now: float) -> float:
    try:
        return now - parse_iso(str(stamp))
    except ValueError:
        return float("inf")


def _iso_in(seconds: float) -> str:
    from datetime import UTC, datetime, timedelta

    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _bell_topic(name: str) -> str | None:
    """`<pid>-<hex>.fifo` rings for everything; `<pid>-<hex>.<topic>.fifo` only for types
    under `<topic>.` (the runner listens on `control`, so data messages never wake it)."""
    parts = name.split(".")
    return parts[1] if len(parts) == 3 else None


def wants(name: str, kind: str | None) -> bool:
    topic = _bell_topic(name)
    return topic is None or kind is None or kind.startswith(topic + ".")


def open_bell(path: Path) -> int | None:
    """A consumer's FIFO open for writing, or None. Never through a planted symlink, and
    never a regular file (a byte written there would land outside the doorbell's purpose)."""
    import stat

    if os.path.islink(path.parent):
        return None
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def ring(doorbells: Path, kind: str | None = None) -> int:
    """Poke every live consumer's FIFO that wants a `kind` message; returns how many."""
    rung = 0
    if os.path.islink(doorbells):
        return 0
    try:
        names = os.listdir(doorbells)
    except FileNotFoundError:
        return 0
    for name in names:
        if not name.endswith(".fifo") or not wants(name, kind):
            continue
        path = doorbells / name
        try:
            opened = open_bell(path)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                _remove_if_orphaned(path, name)
            continue
        if opened is None:
            continue
        fd = opened
        try:
            os.write(fd, b"\n")
            rung += 1
        except BlockingIOError:
            rung += 1  # full pipe: a wake is already pending
        except OSError:
            pass
        finally:
            os.close(fd)
    return rung


def _remove_if_orphaned(path: Path, name: str) -> None:
    pid_text = name.split("-", 1)[0]
    if pid_text.isdigit() and read_stat(int(pid_text)) is None:
        with contextlib.suppress(OSError):
            os.unlink(path)


@contextlib.contextmanager
def doorbell(doorbells: Path, topic: str | None = None) -> Iterator[int]:
    """A private FIFO in `doorbells/`, open for reading (non-blocking) while in use.

    With a `topic` it is rung only for message types under `<topic>.`.

    The consumer also holds a write end itself so the read end never reports a hang-up
    (which would make select() spin) after a sender closes.
    """
    ensure_dir(doorbells)
    suffix = f".{topic}.fifo" if topic else ".fifo"
    path = doorbells / f"{os.getpid()}-{os.urandom(4).hex()}{suffix}"
    os.mkfifo(path, 0o600)
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    write_fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        yield read_fd
    finally:
        os.close(write_fd)
        os.close(read_fd)
        with contextlib.suppress(OSError):
            os.unlink(path)

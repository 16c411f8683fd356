"""Who holds a mailbox entry, and when a hold is over.

A claim records its holder's pid and start ticks (so a reused pid is not mistaken for
the holder) and a lease; a `sending` entry records the sender that may still write it to
the FIFO. Both are taken back only when that process is gone or the lease has run out.
Its own module because these rules decide exactly-once hand-over, apart from the journal
mechanics of `mailbox`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from runtime.core import config
from runtime.core.ids import now_iso, parse_iso
from runtime.core.process import read_stat

if TYPE_CHECKING:
    from runtime.messaging.entries import Holder, InboxLine, MailboxEntry

LEASE_S = config.seconds(config.LEASE_S)
"""How long a claim is exclusive while its holder lives (`$ACTORS_LEASE_S`, default 300 s)."""
CLAIMABLE = ("queued",)
SENDING_GRACE_S = 5.0
"""A `sending` entry that names no sender (written before senders were recorded) is
treated as queued once older than this."""
MAX_WATCHED = 64
"""A waiting consumer holds pidfds on at most this many other holders at once."""
NO_PIDFD_RECHECK_S = 1.0
"""Only for a holder it cannot hold a pidfd on (no pidfd_open on this platform, or past
`MAX_WATCHED`): how often a waiting consumer looks again whether that holder died."""


_my_identity: dict[str, Any] = {}


def me() -> Holder:
    """This process as a claim holder; read once per pid (a fork gets its own)."""
    pid = os.getpid()
    if _my_identity.get("pid") != pid:
        stat = read_stat(pid)
        _my_identity.clear()
        _my_identity.update(pid=pid, start_ticks=stat.start_ticks if stat else None)
    return cast("Holder", dict(_my_identity))


def settle(
    entry: MailboxEntry, now: float, committed: Callable[[str], bool] = lambda _id: False
) -> tuple[str, InboxLine | None]:
    """The entry's effective state, and the line that settles it when whoever held it
    (a fast-path sender, a claim holder) is gone or out of lease; None if it stands.

    A dead fast-path sender's entry is requeued only if the sender never committed to
    its FIFO write (`committed(id)` false): once committed, the FIFO may hold it, and
    handing it to `recv` as well could deliver it twice, so it is settled `sent`."""
    state = entry.get("state")
    if state == "sending" and _sender_gone(entry, now):
        if committed(entry["id"]):
            return "sent", {
                "id": entry["id"],
                "state": "sent",
                "sent_at": now_iso(),
                "settled": "sender died after committing to its FIFO write",
            }
        why = "sender vanished mid fast path"
    elif state == "claimed" and not _claim_live(entry, now):
        why = "claim holder gone or lease expired"
    else:
        return state, None
    return "queued", {"id": entry["id"], "state": "queued", "queued_at": now_iso(), "requeued": why}


def claim_line(entry: MailboxEntry, consumer: str, lease_s: float) -> InboxLine:
    """The state line that hands `entry` to this process for `lease_s` seconds."""
    return {
        "id": entry["id"],
        "state": "claimed",
        "claimed_at": now_iso(),
        "claimed_by": {**me(), "consumer": consumer},
        "lease_until": now_iso(lease_s),
    }


def _sender_gone(entry: MailboxEntry, now: float) -> bool:
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


def _claim_live(entry: MailboxEntry, now: float) -> bool:
    if not _holder_alive(entry.get("claimed_by")):
        return False
    try:
        return parse_iso(str(entry.get("lease_until"))) > now
    except ValueError:
        return False


def _holder_alive(holder: Any) -> bool:
    if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
        return False
    stat = read_stat(holder["pid"])
    if stat is None or stat.state in ("Z", "X"):
        return False
    return holder.get("start_ticks") in (None, stat.start_ticks)


def _age_s(stamp: Any, now: float) -> float:
    try:
        return now - parse_iso(str(stamp))
    except ValueError:
        return float("inf")


@contextlib.contextmanager
def watch_holders(
    entries: list[MailboxEntry], now: float
) -> Iterator[tuple[list[int], float | None]]:
    """What a waiting consumer sleeps on besides its doorbell, for entries others hold:
    a pidfd per live holder (readable once it exits: a consumer killed mid-claim, a
    fast-path sender killed mid-write) and the seconds until the first hold runs out
    by itself (a claim's lease; None: no such deadline). 0 when a holder is gone
    already. The pidfds are closed on leaving.

    Each holder is verified after its pidfd is opened, so the pidfd pins that very
    process and a pid reused since is never watched in its place."""
    fds: list[int] = []
    due: float | None = None

    def soon(seconds: float) -> None:
        nonlocal due
        due = seconds if due is None else min(due, seconds)

    seen: set[tuple[Any, Any]] = set()
    try:
        for entry in entries:
            ends = _hold_ends(entry)
            if ends is not None:
                soon(ends - now)
            holder = entry.get("claimed_by" if entry.get("state") == "claimed" else "sending_by")
            if not isinstance(holder, dict) or not isinstance(holder.get("pid"), int):
                continue  # an older sender without a record: its grace is the deadline
            key = (holder["pid"], holder.get("start_ticks"))
            if key in seen or holder["pid"] == os.getpid():
                continue  # our own claim ends only by its lease
            seen.add(key)
            fd = _pidfd(holder["pid"]) if len(fds) < MAX_WATCHED else None
            if fd is None:
                soon(0.0 if not _holder_alive(holder) else NO_PIDFD_RECHECK_S)
                continue
            fds.append(fd)
            if not _holder_alive(holder):
                soon(0.0)
        yield fds, (None if due is None else max(0.0, due))
    finally:
        for fd in fds:
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:  # gone already (the caller sees it dead), or no pidfds here
        return None


def _hold_ends(entry: MailboxEntry) -> float | None:
    """When a hold runs out by itself (epoch seconds), or None: a claim at its lease's
    end; a `sending` entry that names no sender at its grace's end; a recorded sender
    only by dying."""
    try:
        if entry.get("state") == "claimed":
            return parse_iso(str(entry.get("lease_until")))
        if entry.get("state") == "sending" and not isinstance(entry.get("sending_by"), dict):
            return parse_iso(str(entry.get("queued_at"))) + SENDING_GRACE_S
    except ValueError:
        return 0.0  # unreadable: settle it at once
    return None

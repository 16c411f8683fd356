"""The shapes of an inbox journal's lines and of an entry folded from them.

Their own module because both the journal (`mailbox`) and the hand-over rules (`claims`)
speak of them, and neither should import the other to name a type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Required, TypedDict

if TYPE_CHECKING:
    from runtime.messaging.envelope import Envelope


class Holder(TypedDict, total=False):
    """The process a `claimed` or `sending` entry is held by (`claimed_by`, `sending_by`):
    its pid and start ticks, so a reused pid is never mistaken for it."""

    pid: int
    start_ticks: int | None
    consumer: str
    """Claims only: `recv:<run_id>`, `recv:<branch>` or `runner`."""


class InboxLine(TypedDict, total=False):
    """One line of an inbox journal: an entry line (with `envelope`) or a state line that
    updates the entry of the same `id` (docs/state-files.md, *inbox.jsonl*)."""

    id: Required[str]
    state: Required[str]
    queued_at: str
    run_instance_id: str | None
    sending_by: Holder
    claimed_at: str
    claimed_by: Holder
    lease_until: str
    handled_at: str
    failed_at: str
    error: str | None
    sent_at: str
    settled: str
    """Why a dead fast-path sender's entry was settled `sent` rather than requeued."""
    requeued: str


class MailboxEntry(InboxLine, total=False):
    """An inbox entry as folded from its lines: the entry line's fields, updated by every
    later state line of the same id. Always has its envelope (`refresh` skips lines that
    would create an entry without one)."""

    envelope: Required[Envelope]

"""Typed records of the delivery room: session.json, a session inbox entry, a
deliveries.jsonl line, what handing a follow-up over returns.

For the type checker only: every module imports this under TYPE_CHECKING. A TypedDict
class body costs about half a millisecond at import (each postponed annotation is
compiled), and `spawn` loads the sessions module, so the records live apart from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Required, TypedDict

if TYPE_CHECKING:
    from runtime.messaging.envelope import Envelope


class SessionRecord(TypedDict, total=False):
    """session.json as `actors session register` and the SessionStart hooks write it; an
    owner that never registered reads as `{id, harness: "file", options: {},
    registered: False}` (plus `damaged` when the file is unusable). `load_session` and
    `list_sessions` still return plain dicts: the harness hooks and `actors session`
    commands (actors/cli/hooks.py, actors/cli/delivery.py) update them with keys of their
    own and hand them to the adapter contract's dict-typed `session`."""

    id: Required[str]
    harness: Required[str]
    options: dict[str, Any]
    """Adapter options as given with `-o key=value` (strings), plus hook-found ones."""
    registered: bool
    capabilities: dict[str, Any]
    cwd: str | None
    created_at: str
    last_seen: str
    transcript_path: str | None
    damaged: str
    registered_by: str
    predecessors: list[str]
    """Sessions the same harness process served before this one (runtime.delivery.succession)."""
    successor: str
    """The session the harness process went on to (a `/clear`); gone once this one starts again."""


class SessionEntry(TypedDict, total=False):
    """A session inbox entry: the line `SessionInbox.append` writes, updated by its read
    line (`state: read`, `read_at`) when folded."""

    id: Required[str]
    """The delivery id (the envelope's `idempotency_key`, else its `id`)."""
    state: Required[str]
    mode: str
    queued_at: str
    read_at: str
    moved_at: str
    to: str
    """With state `moved`: the successor session the entry went on to."""
    envelope: Envelope


class DeliveryRecord(TypedDict, total=False):
    """One line of a session's deliveries.jsonl (`created`, an attempt's receipt, or
    `closed`), and a delivery's current state: its latest line, keeping the `mode` and
    `type` its `created` line said (`DeliveryRunner.states`). The receipt's own fields
    (`Receipt.to_dict`, without `delivery_id`) are spread into an attempt's line."""

    ts: str
    id: Required[str]
    event: str
    state: str
    mode: str | None
    type: str | None
    attempts: int
    harness: str
    status: str
    retryable: bool
    available_at: str
    reason: str
    metadata: dict[str, Any]
    observed: list[str]
    next_attempt_at: str | None
    to: str
    """With state `moved`: the successor session the follow-up went on to."""


class ParentHandover(TypedDict, total=False):
    """How a follow-up for a run owned by another run went into that run's inbox."""

    id: str
    state: str
    duplicate: bool
    route: str
    reason: str


Handover = DeliveryRecord | ParentHandover
"""What `followups.deliver` returns: the delivery's state, or the parent-run hand-over."""

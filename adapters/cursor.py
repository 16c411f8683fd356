"""Cursor: no idle wake, so its `stop` hook is the one channel for follow-ups.

`actors hook cursor-stop` (configured by hand in hooks.json, see docs/harnesses.md):
when the agent stops and follow-ups are unread, the hook answers
`{"followup_message": <follow-ups>}`, which Cursor sends as the next user message, never
past the entry's `loop_limit` (Cursor would drop it); silent otherwise.
"""

from __future__ import annotations

from typing import Any

HARNESS = "cursor"
CURSOR_LOOP_LIMIT = 5
"""Cursor's default `loop_limit`; `actors hook cursor-stop --loop-limit` must match the
`loop_limit` of its hooks.json entry."""


def stop(data: dict[str, Any], loop_limit: int) -> None:
    """stop: hand every unread follow-up (but unflushed `manual` ones) over as the next
    user message, unless the user aborted or the loop limit is reached."""
    from runtime.delivery.boundary import hand_over, pick_turn_end, session_of
    from runtime.store.layout import StateRoot

    if data.get("status") == "aborted":
        return  # the user stopped the agent: do not start it again
    try:
        loops = int(data.get("loop_count") or 0)
    except (TypeError, ValueError):
        loops = 0
    if loops >= loop_limit:
        return  # Cursor would drop the follow-up: leave it unread for the next stop
    session_id = session_of(data, "conversation_id", env_first=True)
    if not session_id:
        return
    hand_over(
        StateRoot.from_env(),
        session_id,
        boundary="stop",
        harness=HARNESS,
        pick=pick_turn_end,
        answer=lambda text: {"followup_message": text},
    )

"""GitHub Copilot CLI: its agentStop hook carries follow-ups at a turn's end.

Copilot CLI loads command hooks from `~/.copilot/hooks/*.json` (and a trusted
repository's `.github/hooks/*.json`). Its `agentStop` hook gets `sessionId` and
`stop_hook_active`, and an answer `{"decision": "block", "reason": ...}` makes the reason
the next prompt of the same turn (observed on 1.0.102, `tests/peers/test_copilot.py`).
So `actors hook copilot-agent-stop` is Gemini's turn-end hook with Copilot's event,
session field and decision word (adapters.gemini.continue_turn); there is no idle wake
through it (docs/harnesses.md).
"""

from __future__ import annotations

from typing import Any

HARNESS = "copilot_cli"
COPILOT_MAX_CHAIN = 3
"""Consecutive agentStop continuations before the hook lets the agent stop (Copilot's
own runaway guard is higher)."""


def agent_stop(data: dict[str, Any], max_chain: int) -> None:
    """agentStop: every unread follow-up (but unflushed `manual` ones) as the reason of
    a block, unless `max_chain` continuations in a row already happened."""
    from adapters.gemini import continue_turn

    continue_turn(
        data,
        max_chain,
        harness=HARNESS,
        boundary="agentStop",
        decision="block",
        session_key="sessionId",
    )

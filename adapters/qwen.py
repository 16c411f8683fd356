"""Qwen Code (a fork of Gemini CLI): its Stop hook carries follow-ups at a turn's end.

Qwen Code replaced Gemini's AfterAgent with Claude-style hook events (`Stop`,
`UserPromptSubmit`, `SessionStart`, ... in `hooks` of ~/.qwen/settings.json). Its Stop
hook gets `session_id` and `stop_hook_active` like Gemini's AfterAgent, and an answer
`{"decision": "block", "reason": ...}` makes the reason the next prompt of the same
turn (Qwen caps consecutive blocks itself too). So `actors hook qwen-stop` is Gemini's
hook with Qwen's event name and decision word (adapters.gemini.continue_turn); there is
no idle wake through it (docs/harnesses.md).
"""

from __future__ import annotations

from typing import Any

HARNESS = "qwen_code"
QWEN_MAX_CHAIN = 3
"""Consecutive Stop continuations before the hook lets the agent stop."""


def stop(data: dict[str, Any], max_chain: int) -> None:
    """Stop: every unread follow-up (but unflushed `manual` ones) as the reason of a
    block, unless `max_chain` continuations in a row already happened."""
    from adapters.gemini import continue_turn

    continue_turn(data, max_chain, harness=HARNESS, boundary="Stop", decision="block")

"""Gemini CLI: no idle wake, so its AfterAgent hook is the one channel for follow-ups.

`actors hook gemini-after-agent` (configured by hand in settings.json, see
docs/harnesses.md): when the agent finishes a turn and follow-ups are unread, the hook
answers `{"decision": "deny", "reason": <follow-ups>}`, which Gemini CLI turns into the
next prompt; silent when nothing is pending. A chain counter per session stops an endless
continue-loop after GEMINI_MAX_CHAIN turns.
"""

from __future__ import annotations

import contextlib
from typing import Any

HARNESS = "gemini_cli"
GEMINI_MAX_CHAIN = 3
"""Consecutive AfterAgent continuations (`stop_hook_active`) before the hook lets the
agent stop; what is still unread waits for the next turn."""


def after_agent(data: dict[str, Any], max_chain: int) -> None:
    """AfterAgent: hand every unread follow-up (but unflushed `manual` ones) over as the
    reason of a deny, unless `max_chain` continuations in a row already happened."""
    continue_turn(data, max_chain, harness=HARNESS, boundary="AfterAgent", decision="deny")


def continue_turn(
    data: dict[str, Any],
    max_chain: int,
    *,
    harness: str,
    boundary: str,
    decision: str,
    session_key: str = "session_id",
) -> None:
    """The turn-end continuation Gemini CLI, its fork Qwen Code and Copilot CLI share:
    unread follow-ups as `{"decision": <decision>, "reason": <follow-ups>}`, the hook
    input's `stop_hook_active` counting the continuations in a row (at most `max_chain`);
    the harness's session id is the input's `session_key`."""
    from runtime.delivery.boundary import hand_over, pick_turn_end, session_of
    from runtime.store.layout import StateRoot, session_paths
    from runtime.store.reads import read_json
    from runtime.store.writes import write_json_atomic

    session_id = session_of(data, session_key, env_first=True)
    if not session_id:
        return
    root = StateRoot.from_env()
    chain_file = session_paths(root, session_id).gemini_chain

    def guard() -> bool:
        chain = 0
        if data.get("stop_hook_active") is True:
            with contextlib.suppress(Exception):
                chain = int((read_json(chain_file) or {}).get("count", 0))
        if chain >= max_chain:
            return False
        write_json_atomic(chain_file, {"count": chain + 1})
        return True

    hand_over(
        root,
        session_id,
        boundary=boundary,
        harness=harness,
        pick=pick_turn_end,
        answer=lambda text: {"decision": decision, "reason": text},
        before_output=guard,
    )

"""GitHub Copilot CLI (real, headless, offline BYOK against the fake model) with the
agentStop hook.

`actors hook copilot-agent-stop` answers Copilot's agentStop event with `{"decision":
"block", "reason": <the follow-ups>}` and Copilot sends the reason to the model as the
next prompt of the same turn. The proof is on what the model was sent (the fake LLM's
request bodies, over OpenAI Chat Completions), on the agentStop inputs Copilot gave its
hooks, and on our journal.
"""

from __future__ import annotations

from pathlib import Path

from runtime.store.layout import StateRoot
from tests.peers.fake_llm import FakeLLM
from tests.peers.hooked import hand_over_once
from tests.peers.run_copilot import Copilot

SESSION = "copilot-main"


def test_pending_follow_up_is_the_next_prompt_exactly_once(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    copilot = Copilot(tmp_path / "copilot", fake_llm.port, home.path, SESSION)
    seen = hand_over_once(
        home, fake_llm, copilot, harness="copilot_cli", boundary="agentStop",
        token="TOKEN-COPFOLLOW",
    )  # fmt: skip
    assert all(r["path"] == "/v1/chat/completions" for r in seen.requests)
    first: str = seen.first
    assert first.startswith("ACK TOKEN-FIRST") and "ACK " in first.split("TOKEN-FIRST", 1)[1]
    assert "TOKEN-COPFOLLOW" in first, first
    assert seen.inputs[0]["stopReason"] == "end_turn"
    assert {i["sessionId"] for i in seen.inputs} == {seen.inputs[0]["sessionId"]}
    assert seen.later.strip() == "ACK TOKEN-SECOND", seen.later

"""Gemini CLI (real, headless, offline against the fake model) with the AfterAgent hook.

`actors hook gemini-after-agent` answers AfterAgent with `{"decision": "deny", "reason":
<the follow-ups>}` and Gemini sends the reason to the model as the next prompt of the
same turn. The proof is on what the model was sent (the fake LLM's request bodies), on
the AfterAgent inputs Gemini gave its hooks, and on our inbox and journal.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.store.layout import StateRoot
from tests.peers.fake_llm import FakeLLM
from tests.peers.hooked import hand_over_once
from tests.peers.run_gemini import Gemini

SESSION = "gem-main"


def test_pending_follow_up_is_the_next_prompt_exactly_once(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    gemini = Gemini(tmp_path / "gemini", fake_llm.port, home.path, SESSION)
    seen = hand_over_once(
        home, fake_llm, gemini, harness="gemini_cli", boundary="AfterAgent",
        token="TOKEN-GEMFOLLOW",
    )  # fmt: skip
    assert all(":streamGenerateContent" in r["path"] for r in seen.requests)
    assert "ACK TOKEN-GEMFOLLOW" in json.dumps(seen.first)
    assert seen.inputs[0]["prompt"] == "hello TOKEN-FIRST"
    assert seen.inputs[0]["prompt_response"] == "ACK TOKEN-FIRST"
    assert "TOKEN-GEMFOLLOW" in seen.inputs[1]["prompt_response"]
    assert seen.later["response"] == "ACK TOKEN-SECOND", seen.later

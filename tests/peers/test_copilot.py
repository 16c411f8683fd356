"""GitHub Copilot CLI (real, headless, offline BYOK against the fake model) with the
agentStop hook.

`actors hook copilot-agent-stop` answers Copilot's agentStop event with `{"decision":
"block", "reason": <the follow-ups>}` and Copilot sends the reason to the model as the
next prompt of the same turn. The proof is on what the model was sent (the fake LLM's
request bodies, over OpenAI Chat Completions), on the agentStop inputs Copilot gave its
hooks, and on our journal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_copilot import Copilot

SESSION = "copilot-main"


def _handed_over(home: StateRoot, ident: str) -> list[dict[str, Any]]:
    path = session_paths(home, SESSION).deliveries
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        r
        for r in records
        if r["id"] == ident and r["event"] == "delivered" and r.get("harness") == "copilot_cli"
    ]


def test_pending_follow_up_is_the_next_prompt_exactly_once(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    done = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert done.returncode == 0, done.stderr
    envelope = {
        "type": "run.done",
        "from": "run:copilot",
        "summary": "Run TOKEN-COPFOLLOW done",
        "body": {"status": "done"},
    }
    DeliveryRunner(home).submit(SESSION, envelope, delivery_id="d-copilot")
    copilot = Copilot(tmp_path / "copilot", fake_llm.port, home.path, SESSION).setup()

    result = copilot.run("hello TOKEN-FIRST")

    prompts = [last_user_text(r["body"]) for r in fake_llm.requests]
    assert len(prompts) == 2, prompts
    assert "TOKEN-FIRST" in prompts[0] and "TOKEN-COPFOLLOW" not in prompts[0]
    assert "TOKEN-COPFOLLOW" in prompts[1] and "d-copilot" in prompts[1]
    assert all(r["path"] == "/v1/chat/completions" for r in fake_llm.requests)
    assert result.startswith("ACK TOKEN-FIRST") and "ACK " in result.split("TOKEN-FIRST", 1)[1]
    assert "TOKEN-COPFOLLOW" in result, result
    # Copilot's own record of the hook calls: the turn's end, then the continuation's end
    # (stop_hook_active), where our hook found nothing and let the agent stop.
    inputs = copilot.stop_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, True], inputs
    assert inputs[0]["stopReason"] == "end_turn"
    assert {i["sessionId"] for i in inputs} == {inputs[0]["sessionId"]}
    (record,) = _handed_over(home, "d-copilot")
    assert record["metadata"]["boundary"] == "agentStop"
    assert cli("inbox", "read", "--session", SESSION).stdout == "0 unread follow-up(s)\n"

    # A later turn: nothing pending, so one model request and no follow-up in it.
    before = len(fake_llm.requests)
    again = copilot.run("later TOKEN-SECOND")
    assert again.strip() == "ACK TOKEN-SECOND", again
    (request,) = fake_llm.requests[before:]
    assert "TOKEN-SECOND" in last_user_text(request["body"])
    assert "TOKEN-COPFOLLOW" not in json.dumps(request["body"])
    assert [i["stop_hook_active"] for i in copilot.stop_inputs()] == [False, True, False]
    assert len(_handed_over(home, "d-copilot")) == 1

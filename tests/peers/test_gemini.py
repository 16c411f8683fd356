"""Gemini CLI (real, headless, offline against the fake model) with the AfterAgent hook.

`actors hook gemini-after-agent` answers AfterAgent with `{"decision": "deny", "reason":
<the follow-ups>}` and Gemini sends the reason to the model as the next prompt of the
same turn. The proof is on what the model was sent (the fake LLM's request bodies), on
the AfterAgent inputs Gemini gave its hooks, and on our inbox and journal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_gemini import Gemini

SESSION = "gem-main"


def _handed_over(home: StateRoot, ident: str) -> list[dict[str, Any]]:
    path = session_paths(home, SESSION).deliveries
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        r
        for r in records
        if r["id"] == ident and r["event"] == "delivered" and r.get("harness") == "gemini_cli"
    ]


def test_pending_follow_up_is_the_next_prompt_exactly_once(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    done = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert done.returncode == 0, done.stderr
    envelope = {
        "type": "run.done",
        "from": "run:gem",
        "summary": "Run TOKEN-GEMFOLLOW done",
        "body": {"status": "done"},
    }
    DeliveryRunner(home).submit(SESSION, envelope, delivery_id="d-gem")
    peek = cli("inbox", "read", "--session", SESSION, "--peek").stdout
    assert peek.startswith("1 unread follow-up(s)\n") and "TOKEN-GEMFOLLOW" in peek, peek
    gemini = Gemini(tmp_path / "gemini", fake_llm.port, home.path, SESSION).setup()

    result = gemini.run("hello TOKEN-FIRST")

    prompts = [last_user_text(r["body"]) for r in fake_llm.requests]
    assert len(prompts) == 2, prompts
    assert "TOKEN-FIRST" in prompts[0] and "TOKEN-GEMFOLLOW" not in prompts[0]
    assert "TOKEN-GEMFOLLOW" in prompts[1] and "d-gem" in prompts[1]
    assert sum("TOKEN-GEMFOLLOW" in p for p in prompts) == 1
    assert all(":streamGenerateContent" in r["path"] for r in fake_llm.requests)
    assert "ACK TOKEN-GEMFOLLOW" in json.dumps(result)
    # Gemini's own record of the hook calls: the turn's end, then the continuation's
    # end (stop_hook_active), where our hook found nothing and let the agent stop.
    inputs = gemini.after_agent_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, True], inputs
    assert inputs[0]["prompt"] == "hello TOKEN-FIRST"
    assert inputs[0]["prompt_response"] == "ACK TOKEN-FIRST"
    assert "TOKEN-GEMFOLLOW" in inputs[1]["prompt_response"]
    (record,) = _handed_over(home, "d-gem")
    assert record["metadata"]["boundary"] == "AfterAgent"
    assert cli("inbox", "read", "--session", SESSION).stdout == "0 unread follow-up(s)\n"

    # A later turn: nothing pending, so one model request and no follow-up in it.
    before = len(fake_llm.requests)
    again = gemini.run("later TOKEN-SECOND")
    assert again["response"] == "ACK TOKEN-SECOND", again
    (request,) = fake_llm.requests[before:]
    assert "TOKEN-SECOND" in last_user_text(request["body"])
    assert "TOKEN-GEMFOLLOW" not in json.dumps(request["body"])
    assert [i["stop_hook_active"] for i in gemini.after_agent_inputs()] == [False, True, False]
    assert len(_handed_over(home, "d-gem")) == 1

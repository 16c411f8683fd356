"""The MCP tools through the real `opencode serve`: two sessions on one server.

Set up only as docs/harnesses.md says: the real `actors install opencode --user` (the
MCP entry and the session plugin) before the server starts; no `actors session
register`: the MCP server registers each calling session itself from what the plugin
adds to the call. The fake model calls our tools (`actors_<tool>`) on `[tool:...]`;
what a tool returned is read from the next model request (the `tool` message).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import load_session
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import finished
from tests.peers.conftest import followup
from tests.peers.fake_llm import FakeLLM
from tests.peers.run_opencode import OpenCode, opencode_server


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[OpenCode]:
    with opencode_server(tmp_path / "oc", fake_llm.port, install=True) as oc:
        yield oc


def tool_output(body: dict[str, Any]) -> str | None:
    """What a tool gave the model: the `tool` message that ends a Chat Completions
    request (None for a request that does not carry a fresh tool result)."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    return str(last["content"]) if last.get("role") == "tool" else None


def call_tool(oc: OpenCode, llm: FakeLLM, session: str, tool: str, args: Any) -> str:
    """A prompt in `session` whose model calls `actors_<tool>`; what the model got back."""
    start = len(llm.requests)
    text = f"[tool:actors_{tool}:{json.dumps(args)}] in {session}"
    with oc.client() as client:
        posted = client.post(
            f"/session/{session}/prompt_async", json={"parts": [{"type": "text", "text": text}]}
        )
    assert posted.status_code == 204, posted.text
    answered = llm.wait_request(
        lambda r: tool_output(r["body"]) is not None and session in json.dumps(r["body"]),
        start,
        timeout=60,
    )
    return str(tool_output(answered["body"]))


def test_two_sessions_on_one_server_each_get_their_own_runs_follow_ups(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    first, second = server.new_session(), server.new_session()
    seen = call_tool(server, fake_llm, first, "spawn", {"template": "true", "as": "run:oc-a"})
    assert seen == "started run:oc-a; its follow-up will arrive in this session (do not poll)"
    call_tool(server, fake_llm, second, "spawn", {"template": "true", "as": "run:oc-b"})
    assert actors.status("oc-a")["owner_id"] == first
    assert actors.status("oc-b")["owner_id"] == second
    record = load_session(home, first)
    assert record["harness"] == "opencode" and record["options"]["session"] == first
    assert record["options"]["url"] == server.url
    for run in ("oc-a", "oc-b"):
        finished(actors.status(run))
    texts = {ses: " ".join(server.user_texts(ses)) for ses in (first, second)}
    assert "Run oc-a" in texts[first] and "oc-b" not in texts[first]
    assert "Run oc-b" in texts[second] and "oc-a" not in texts[second]
    assert any("Run oc-a" in p for p in fake_llm.prompts()), "the model never saw it"

    seen = call_tool(server, fake_llm, first, "inbox_read", {})
    assert seen == "0 unread follow-up(s)", seen  # handed over once, as the woken turn

    actors.spawn(template="sleep 30", as_="run:oc-c", session=second)
    seen = call_tool(
        server, fake_llm, second, "message", {"to": "run:oc-c", "type": "control.stop"}
    )
    assert "queued" in seen or "delivered" in seen, seen
    assert actors.wait("oc-c", timeout=30)["status"] != "running"


def test_the_woken_turns_own_inbox_read_does_not_get_the_follow_up_again(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = server.new_session()
    call_tool(server, fake_llm, ses, "recipes", {})  # registers the session
    envelope = followup("TOKEN-ONCE")
    envelope["summary"] = f"Run peer done [tool:actors_inbox_read:{{}}] TOKEN-ONCE {ses}"
    start = len(fake_llm.requests)
    state = DeliveryRunner(home).submit(ses, envelope, delivery_id="d-once")
    assert state["state"] == "delivered", state
    answered = fake_llm.wait_request(lambda r: tool_output(r["body"]) is not None, start, 30)
    assert tool_output(answered["body"]) == "0 unread follow-up(s)"
    journal = read_jsonl(session_paths(home, ses).deliveries).records
    delivered = [r for r in journal if r.get("id") == "d-once" and r.get("event") == "delivered"]
    assert len(delivered) == 1, delivered

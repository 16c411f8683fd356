"""The MCP tools through the real Codex app-server: the fake model calls them by name.

Set up as docs/harnesses.md says: the real `actors install codex --user` writes our MCP
server (with `env_vars`, since Codex starts MCP servers with a whitelisted environment)
before the app-server starts. The test's own connection is the user's client: it owns
the thread and answers Codex's approval requests (`mcpServer/elicitation/request`), as
the TUI would. The MCP server learns the calling thread from each call's
`_meta.threadId`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import actors
from adapters.codex.rpc import CodexConnection, connect
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import load_session
from runtime.store.layout import StateRoot
from tests.conftest import finished
from tests.peers.conftest import followup, register_session
from tests.peers.fake_llm import FakeLLM
from tests.peers.run_codex import Codex, codex_server


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[Codex]:
    with codex_server(tmp_path / "codex", fake_llm.port, install=True) as codex:
        yield codex


@pytest.fixture
async def user(server: Codex) -> AsyncIterator[tuple[CodexConnection, str, list[str]]]:
    """The user's client: owns a thread, accepts every approval Codex asks it for (and
    lists the tools it approved)."""
    approved: list[str] = []
    async with connect(socket=str(server.socket)) as conn:
        await conn.initialize("peer-user")
        thread = (await conn.request("thread/start", {"cwd": str(server.project)}))["thread"]["id"]
        ready = await conn.wait_for(  # a turn before this would have no actors tools yet
            lambda n: (
                n["method"] == "mcpServer/startupStatus/updated"
                and n["params"].get("name") == "actors"
                and n["params"].get("status") == "ready"
            ),
            30,
        )
        assert ready is not None, "Codex never reported the actors MCP server ready"
        async with trio.open_nursery() as nursery:

            async def approve() -> None:
                seen = 0
                while True:
                    for request in conn.server_requests[seen:]:
                        if request.get("method") == "mcpServer/elicitation/request":
                            meta = (request.get("params") or {}).get("_meta") or {}
                            approved.append(str(meta.get("tool_name")))
                            await conn.answer(request, {"action": "accept", "content": {}})
                    seen = len(conn.server_requests)
                    await conn.wait_for(lambda _: True, 1, len(conn.notifications))

            nursery.start_soon(approve)
            yield conn, thread, approved
            nursery.cancel_scope.cancel()


def outputs(body: dict[str, Any]) -> list[str]:
    """The text of each function_call_output in a Responses request (what the model got)."""
    out = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            given = item.get("output")
            if isinstance(given, list):
                given = "\n".join(str(p.get("text", "")) for p in given if isinstance(p, dict))
            out.append(str(given))
    return out


async def turn(conn: CodexConnection, thread: str, llm: FakeLLM, tool: str, args: Any) -> str:
    """A user turn in which the model calls our `tool`; the output the model received."""
    start, mark = len(llm.requests), len(conn.notifications)
    text = f"[tool:mcp__actors.{tool}:{json.dumps(args)}]"
    await conn.request(
        "turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]}
    )
    done = await conn.wait_for(lambda n: n["method"] == "turn/completed", 60, mark)
    assert done is not None and done["params"]["turn"]["status"] == "completed"
    request = llm.requests[start:][-1]["body"]
    return outputs(request)[-1]


async def test_spawn_follow_up_wakes_the_thread_and_tools_answer_compactly(
    home: StateRoot, server: Codex, user: tuple[CodexConnection, str, list[str]], fake_llm: FakeLLM
) -> None:
    conn, thread, approved = user
    register_session("codex", "coord", socket=str(server.socket), thread=thread)
    seen = await turn(conn, thread, fake_llm, "spawn", {"template": "true", "as": "run:cx1"})
    assert "started run:cx1" in seen and "do not poll" in seen, seen
    assert actors.status("cx1")["owner_id"] == "coord"  # not user:<login>: _meta.threadId
    assert "spawn" in approved
    mark = len(conn.notifications)
    await trio.to_thread.run_sync(finished, actors.status("cx1"))
    woken = await conn.wait_for(
        lambda n: (
            n["method"] == "item/completed"
            and n["params"]["item"].get("type") == "userMessage"
            and "cx1" in json.dumps(n["params"]["item"])
        ),
        30,
        mark,
    )
    assert woken is not None, "the run's follow-up never became a turn in the thread"
    assert any("cx1" in p for p in fake_llm.prompts())
    await conn.wait_for(lambda n: n["method"] == "turn/completed", 30, mark)
    seen = await turn(conn, thread, fake_llm, "inbox_read", {})
    assert seen.endswith('{"followups":[]}'), seen  # handed over once, in the woken turn

    await trio.to_thread.run_sync(
        lambda: actors.spawn(template="sleep 30", as_="run:cx2", session="coord")
    )
    seen = await turn(conn, thread, fake_llm, "message", {"to": "run:cx2", "type": "control.stop"})
    assert "queued" in seen or "delivered" in seen, seen
    final = await trio.to_thread.run_sync(lambda: actors.wait("cx2", timeout=30))
    assert final["status"] != "running"


async def test_an_unregistered_thread_gets_its_own_session_with_the_app_server_socket(
    home: StateRoot, server: Codex, user: tuple[CodexConnection, str, list[str]], fake_llm: FakeLLM
) -> None:
    conn, thread, _ = user
    seen = await turn(conn, thread, fake_llm, "spawn", {"template": "true", "as": "run:cx3"})
    assert "started run:cx3" in seen
    owner = actors.status("cx3")["owner_id"]
    assert owner == f"codex-{thread}"
    record = load_session(home, owner)
    assert record["harness"] == "codex" and record["options"]["thread"] == thread
    assert Path(record["options"]["socket"]) == server.socket
    mark = len(conn.notifications)
    await trio.to_thread.run_sync(finished, actors.status("cx3"))
    woken = await conn.wait_for(
        lambda n: (
            n["method"] == "item/completed"
            and n["params"]["item"].get("type") == "userMessage"
            and "cx3" in json.dumps(n["params"]["item"])
        ),
        30,
        mark,
    )
    assert woken is not None


async def test_approvals_during_a_woken_turn_are_left_to_the_users_client(
    home: StateRoot, server: Codex, user: tuple[CodexConnection, str, list[str]], fake_llm: FakeLLM
) -> None:
    """The adapter watches the turn it started; the model calls a tool needing approval
    in that turn: the adapter must not answer (Codex took its error as "declined")."""
    conn, thread, approved = user
    register_session(
        "codex", "coord", socket=str(server.socket), thread=thread, processed_timeout="20"
    )
    envelope = followup("TOKEN-APPROVE")
    spawn = json.dumps({"template": "true", "as": "run:cx-woken"})
    envelope["summary"] = f"Run peer done [tool:mcp__actors.spawn:{spawn}] TOKEN-APPROVE"
    state = await trio.to_thread.run_sync(
        lambda: DeliveryRunner(home).submit("coord", envelope, delivery_id="d-approve")
    )
    assert state["state"] == "delivered" and "processed" in state["observed"], state
    calls = [
        n["params"]["item"]
        for n in conn.notifications
        if n["method"] == "item/completed" and n["params"]["item"].get("type") == "mcpToolCall"
    ]
    assert [c["status"] for c in calls] == ["completed"], calls
    assert approved == ["spawn"]  # asked, and answered by the user's client only
    assert actors.status("cx-woken")["owner_id"] == "coord"


async def test_read_only_tools_run_without_asking(
    home: StateRoot, server: Codex, user: tuple[CodexConnection, str, list[str]], fake_llm: FakeLLM
) -> None:
    """Codex asks before a tool that may be destructive or reach outside (spawn,
    message) and runs the others (inspect, recipes: readOnlyHint; inbox_read) at once."""
    conn, thread, approved = user
    seen = await turn(conn, thread, fake_llm, "recipes", {})
    assert "hello" in seen
    seen = await turn(conn, thread, fake_llm, "inspect", {"target": "session:all", "view": "runs"})
    assert "Wall time" in seen
    seen = await turn(conn, thread, fake_llm, "inbox_read", {})
    assert seen.endswith('{"followups":[]}') and approved == []

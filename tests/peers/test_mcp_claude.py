"""The MCP tools through the real Claude Code: the fake model calls them, as a model would.

Set up only as docs/harnesses.md says: `actors install claude-code --user` (run_claude.py)
and `--allowedTools mcp__actors` for headless `claude -p`. The model's `[tool:...]`
prompts make the fake model answer with `tool_use` blocks for our MCP tools; what the
tool returned is read back from the next model request (the `tool_result` Claude Code
sent), so the tests assert on what the model actually received.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.conftest import peer_bin
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_claude import DOORBELL_ONLY, ClaudeSession, claude_session
from tests.reliability._attack import gated_run, release


@pytest.fixture
def claude(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    binary = peer_bin("claude")
    allow = ("--allowedTools", "mcp__actors")
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=allow, settings=DOORBELL_ONLY
    ) as session:
        yield session


def first_turn(claude: ClaudeSession) -> str:
    """The first user turn (SessionStart registers the session), then more turns until
    Claude Code reports `actors mcp` connected (under load it may still be starting, and
    each turn's init event says where it is); the session id."""
    claude.send_user("hello TOKEN-FIRST")
    session = str(claude.next_result(timeout=90)["session_id"])
    for turn in range(10):
        init = [
            e for e in claude.events if e.get("type") == "system" and e.get("subtype") == "init"
        ]
        status = {s["name"]: s.get("status") for s in init[-1]["mcp_servers"]}.get("actors")
        if status != "pending":
            break
        mark = claude.mark()
        claude.send_user(f"TOKEN-WAIT{turn}")
        claude.next_result(timeout=90, after=mark)
    assert status == "connected", init[-1]["mcp_servers"]
    return session


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of each tool_result block in the request's last user message."""
    last = [m for m in body.get("messages") or [] if m.get("role") == "user"][-1]
    out = []
    for part in last.get("content") if isinstance(last.get("content"), list) else []:
        if isinstance(part, dict) and part.get("type") == "tool_result":
            content = part.get("content")
            if isinstance(content, list):
                content = "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            out.append(str(content))
    return out


def call_tool(claude: ClaudeSession, llm: FakeLLM, tool: str, args: dict[str, Any]) -> str:
    """One user turn in which the model calls `mcp__actors__<tool>`; what the model got
    back (the tool_result Claude Code sent it), once the turn has ended."""
    start, mark = len(llm.requests), claude.mark()
    claude.send_user(f"[tool:mcp__actors__{tool}:{json.dumps(args)}]")
    result = claude.next_result(timeout=90, after=mark)
    assert result["is_error"] is False, result
    answered = llm.wait_request(lambda r: bool(tool_results(r["body"])), start, timeout=30)
    (text,) = tool_results(answered["body"])
    return text


def wait_wake(llm: FakeLLM, session: str, start: int) -> str:
    """The model request our doorbell woke for `session` (the idle session, no input;
    these sessions refuse socket messages, DOORBELL_ONLY: the tests read the inbox after
    the wake, which a socket wake would have marked read)."""
    request = llm.wait_request(
        lambda r: (
            "unread follow-up" in last_user_text(r["body"]) and session in last_user_text(r["body"])
        ),
        start,
        timeout=60,
    )
    return last_user_text(request["body"])


def test_spawn_wake_inbox_read_and_message_through_claude_code(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session = first_turn(claude)

    start = len(fake_llm.requests)
    seen = call_tool(claude, fake_llm, "spawn", {"template": "true", "as": "run:ccmcp1"})
    # Claude Code hands the model the structured content: it must carry the guidance
    assert "started run:ccmcp1" in seen and "do not poll" in seen, seen
    assert len(seen) < 200, seen
    assert actors.status("ccmcp1")["owner_id"] == session
    finished(actors.status("ccmcp1"))
    assert "Run ccmcp1" in wait_wake(fake_llm, session, start)

    seen = call_tool(claude, fake_llm, "inbox_read", {})
    assert "ccmcp1" in seen and "run.done" in seen, seen
    # type, sender, summary and where the body is kept: no envelope ids, no body text
    assert len(seen) < 400 and '"body"' not in seen and "body_file" in seen, seen
    assert "do not poll" not in seen and '"id"' not in seen
    assert call_tool(claude, fake_llm, "inbox_read", {}).count("ccmcp1") == 0  # read once

    actors.spawn(template="sleep 30", as_="run:ccmcp2", session=session)
    seen = call_tool(claude, fake_llm, "message", {"to": "run:ccmcp2", "type": "control.stop"})
    assert "queued" in seen or "delivered" in seen, seen
    assert actors.wait("ccmcp2", timeout=30)["status"] in ("stopped", "cancelled", "done")


def test_after_clear_runs_belong_to_the_new_session_and_wake_it(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    old = first_turn(claude)
    call_tool(claude, fake_llm, "spawn", {"template": "true", "as": "run:before-clear"})
    assert actors.status("before-clear")["owner_id"] == old
    # its follow-up is in the old inbox before the clear, so the new session start hands
    # it over (read there); one that ended after the clear would be forwarded unread and
    # rightly lead the new session's wake (CI saw that under load)
    finished(actors.status("before-clear"))

    mark = claude.mark()
    claude.send_user("/clear")
    new = str(claude.next_result(timeout=60, after=mark)["session_id"])
    assert new != old

    start = len(fake_llm.requests)
    seen = call_tool(claude, fake_llm, "spawn", {"template": "true", "as": "run:after-clear"})
    assert "started run:after-clear" in seen
    assert actors.status("after-clear")["owner_id"] == new  # the same MCP server process
    finished(actors.status("after-clear"))
    assert "Run after-clear" in wait_wake(fake_llm, new, start)
    seen = call_tool(claude, fake_llm, "inbox_read", {})
    assert "after-clear" in seen and "before-clear" not in seen, seen


@pytest.mark.parametrize("pin", ["", "claude-previous"], ids=["current", "claude-previous"])
def test_after_clear_the_same_claude_stops_and_is_woken_by_runs_it_started_before(
    pin: str, fake_llm: FakeLLM, home: StateRoot, tmp_path: Path
) -> None:
    """Issue 26: `/clear` gives the conversation a new id in the same process (both pins);
    the runs it started before stay its own (stopped through MCP, which has no --force)
    and one that ends after the clear wakes the live process instead of waiting in the
    old inbox."""
    binary, allow = peer_bin("claude", pin), ("--allowedTools", "mcp__actors")
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=allow, settings=DOORBELL_ONLY
    ) as claude:
        _clear_keeps_runs(claude, fake_llm, tmp_path)


def _clear_keeps_runs(claude: ClaudeSession, fake_llm: FakeLLM, tmp_path: Path) -> None:
    old = first_turn(claude)
    call_tool(claude, fake_llm, "spawn", {"template": "sleep 300", "as": "run:held"})
    assert actors.status("held")["owner_id"] == old
    late, go = gated_run(tmp_path, "late", "echo TOKEN-LATE-RUN", session=old)

    mark = claude.mark()
    claude.send_user("/clear")
    new = str(claude.next_result(timeout=60, after=mark)["session_id"])
    assert new != old

    seen = call_tool(claude, fake_llm, "message", {"to": "run:held", "type": "control.stop"})
    assert "belongs to" not in seen and ("queued" in seen or "delivered" in seen), seen
    assert actors.wait("held", timeout=60)["status"] != "running"

    start = len(fake_llm.requests)
    release(go)
    assert finished(late)["status"] == "done"
    woken = wait_wake(fake_llm, new, start)  # the live process, under its new id
    assert f"Run {late['run']}" in woken, woken
    seen = call_tool(claude, fake_llm, "inbox_read", {})
    assert late["run"] in seen, seen
    assert cli("inbox", "read", "--session", old).stdout == "0 unread follow-up(s)\n"


@pytest.mark.parametrize("pin", ["", "claude-previous"], ids=["current", "claude-previous"])
def test_resume_surfaces_a_follow_up_that_arrived_while_the_session_was_dead(
    pin: str, home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """`claude --resume` brings the same id back in a new process: what arrived while no
    process served it comes with the SessionStart answer, once."""
    binary = peer_bin("claude", pin)
    session = str(uuid.UUID("0b5e55ed-0000-4000-8000-0000000026aa"))
    first = ("--session-id", session)
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=first, settings=DOORBELL_ONLY
    ) as live:
        live.send_user("hello TOKEN-FIRST")
        assert live.next_result(timeout=90)["session_id"] == session
    run = finished(actors.spawn(template="echo TOKEN-WHILE-DEAD", session=session))
    assert cli("inbox", "read", "--session", session, "--peek").stdout.startswith("1 unread")

    again = ("--resume", session)
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=again, settings=DOORBELL_ONLY
    ) as back:
        start = len(fake_llm.requests)
        back.send_user("back TOKEN-BACK")
        result = back.next_result(timeout=90)
        assert result["session_id"] == session and result["is_error"] is False, result
        (request,) = fake_llm.requests[start:]
        text = json.dumps(request["body"])
        assert f"Run {run['run']}" in text and "SessionStart hook additional context" in text
        mark, start = back.mark(), len(fake_llm.requests)
        back.send_user("later TOKEN-LATER")
        back.next_result(timeout=90, after=mark)
        (later,) = fake_llm.requests[start:]
        assert json.dumps(later["body"]).count(f"Run {run['run']}") == 1  # once, not again
    assert cli("inbox", "read", "--session", session).stdout == "0 unread follow-up(s)\n"

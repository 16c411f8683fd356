"""Boundary modes on the real Claude Code (stream-json, fake model on loopback).

Claude Code is configured only by `actors install claude-code --user`, which writes the
UserPromptSubmit and PreToolUse hooks next to SessionStart / FileChanged. The fake model
calls a tool when a prompt says `[tool:Bash:...]` and holds a reply on `[gate:NAME]`
until the test releases it, so "mid-turn" is a fact the test arranges, not a timing
guess. Every assertion is on what the model was sent (the fake LLM's request bodies), on
the hook answers Claude Code reports (`--include-hook-events`) and on our journal.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished
from tests.peers.conftest import peer_bin
from tests.peers.fake_llm import FakeLLM, _text_of, last_user_text
from tests.peers.run_claude import DOORBELL_ONLY, ClaudeSession, Event, claude_session

SESSION = str(uuid.UUID("0b5e55ed-0000-4000-8000-00000000b0d1"))


def _all_text(body: dict[str, Any]) -> str:
    parts = [_text_of(body.get("system"))]
    for message in body.get("messages") or []:
        parts.append(_text_of(message.get("content")))
    return "\n".join(parts)


def _hook_answers(claude: ClaudeSession, event: str, after: int) -> list[str]:
    """The stdout of each run of our hook for `event` since `after` ('' when silent)."""
    return [str(e.get("output") or "") for e in claude.hook_responses(event, after)]


def _surfaced(answers: list[str], delivery_id: str) -> int:
    return sum(f"delivery {delivery_id}" in answer for answer in answers)


def _first_turn(claude: ClaudeSession) -> str:
    claude.send_user("hello TOKEN-FIRST")
    result = claude.next_result(timeout=90)
    assert result["is_error"] is False and result["result"] == "ACK TOKEN-FIRST", result
    return str(result["session_id"])


def _file_changed(claude: ClaudeSession, after: int) -> Event:
    """The next FileChanged hook run (the inbox append writes the wake file)."""
    return claude.wait_for(
        lambda e: e.get("subtype") == "hook_response" and e.get("hook_event") == "FileChanged",
        timeout=30,
        after=after,
    )


def _delivered(home: StateRoot, session_id: str, ident: str) -> list[dict[str, Any]]:
    path = session_paths(home, session_id).deliveries
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if r["id"] == ident and r["event"] == "delivered"]


@pytest.fixture
def claude(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    """Claude Code with the Bash tool allowed (so the fake model's tool call runs) and a
    session id fixed in advance (so the session can be registered before it starts)."""
    binary = peer_bin("claude")
    extra = ("--allowedTools", "Bash", "--session-id", SESSION)
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=extra, settings=DOORBELL_ONLY
    ) as session:
        yield session


def test_a_follow_up_arriving_mid_turn_is_surfaced_at_the_next_tool_call_once(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _first_turn(claude)
    mark, before = claude.mark(), len(fake_llm.requests)

    # The model is busy: its request for this prompt is in, its answer (a Bash call) held.
    claude.send_user("work [gate:busy] [tool:Bash:echo TOKEN-TOOL-OUT]")
    fake_llm.wait_request(lambda r: "[gate:busy]" in last_user_text(r["body"]), before)
    envelope = {
        "type": "run.done",
        "from": "run:mid",
        "summary": "Run TOKEN-MID done",
        "body": {"status": "done", "note": "arrived mid-turn"},
    }
    DeliveryRunner(home).submit(session_id, envelope, delivery_id="d-mid", mode="next-tool-call")
    assert [e["id"] for e in SessionInbox(session_paths(home, session_id)).unread()] == ["d-mid"]
    # The inbox append rang the wake file; the doorbell stays silent for a held follow-up.
    rung = _file_changed(claude, mark)
    assert (rung["exit_code"], rung["stderr"]) == (0, "")
    fake_llm.release("busy")

    result = claude.next_result(timeout=60, after=mark)
    assert result["is_error"] is False, result
    # The request after the tool ran carries the tool's output and our additionalContext.
    assert result["result"] == "ACK TOKEN-TOOL-OUT TOKEN-MID"
    requests = fake_llm.requests[before:]
    assert len(requests) == 2, [last_user_text(r["body"]) for r in requests]
    assert "TOKEN-MID" not in _all_text(requests[0]["body"])
    after_tool = requests[1]["body"]["messages"][-1]["content"]
    assert after_tool[0]["type"] == "tool_result"
    reminder = _text_of(after_tool[1:])
    assert "PreToolUse:Bash hook additional context: [actors] 1 follow-up(s)" in reminder
    assert "delivery d-mid" in reminder and "arrived mid-turn" in reminder

    (answer,) = [a for a in _hook_answers(claude, "PreToolUse", mark) if a]
    assert json.loads(answer)["hookSpecificOutput"].keys() == {
        "hookEventName",
        "additionalContext",
    }  # no permission decision: the tool ran as it would have
    (record,) = _delivered(home, session_id, "d-mid")
    assert record["observed"] == ["queued", "injected"]
    assert record["metadata"]["boundary"] == "PreToolUse"
    assert SessionInbox(session_paths(home, session_id)).unread() == []

    # The next tool call (and the prompt before it) surface nothing more.
    again, before = claude.mark(), len(fake_llm.requests)
    claude.send_user("again [tool:Bash:echo TOKEN-TOOL-2]")
    assert claude.next_result(timeout=60, after=again)["result"] == "ACK TOKEN-TOOL-2"
    assert _hook_answers(claude, "PreToolUse", again) == [""]
    assert _hook_answers(claude, "UserPromptSubmit", again) == [""]
    last = fake_llm.requests[-1]["body"]
    assert _all_text(last).count("delivery d-mid") == 1  # once in the whole conversation
    assert len(_delivered(home, session_id, "d-mid")) == 1


def test_a_follow_up_arriving_between_prompts_comes_with_the_next_user_message_once(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The session is registered `-o mode=next-message` before Claude Code starts; a
    run's follow-up that lands while the session is idle is held (no wake) and rides
    along with the next prompt, and with no later one."""
    registered = cli(
        "session",
        "register",
        "--harness",
        "claude_code",
        "--id",
        SESSION,
        "-o",
        "mode=next-message",
    )
    assert registered.returncode == 0, registered.stderr
    session_id = _first_turn(claude)
    assert session_id == SESSION
    record = json.loads(session_paths(home, SESSION).record.read_text())
    assert record["options"]["mode"] == "next-message"  # SessionStart kept the option

    mark, before = claude.mark(), len(fake_llm.requests)
    run = actors.spawn(template="echo TOKEN-RUN-NM", session=SESSION)
    assert finished(run)["status"] == "done"
    (entry,) = SessionInbox(session_paths(home, SESSION)).unread()
    assert entry["mode"] == "next-message" and entry["envelope"]["from"] == f"run:{run['run']}"
    delivery_id = entry["id"]
    rung = _file_changed(claude, mark)
    assert (rung["exit_code"], rung["stderr"]) == (0, "")  # held: no wake
    assert len(fake_llm.requests) == before  # the idle session was not started

    claude.send_user("next prompt TOKEN-P2")
    result = claude.next_result(timeout=60, after=mark)
    assert result["is_error"] is False, result
    (request,) = fake_llm.requests[before:]
    prompt_message = last_user_text(request["body"])
    assert "TOKEN-P2" in prompt_message
    assert "UserPromptSubmit hook additional context: [actors] 1 follow-up(s)" in prompt_message
    assert f"delivery {delivery_id}" in prompt_message
    assert f"Run {run['run']} done" in prompt_message
    assert _surfaced(_hook_answers(claude, "UserPromptSubmit", mark), delivery_id) == 1
    (journaled,) = _delivered(home, SESSION, delivery_id)
    assert journaled["metadata"]["boundary"] == "UserPromptSubmit"
    assert journaled["observed"] == ["queued", "injected"]

    later, before = claude.mark(), len(fake_llm.requests)
    claude.send_user("later prompt TOKEN-P3")
    assert claude.next_result(timeout=60, after=later)["result"] == "ACK TOKEN-P3"
    assert _hook_answers(claude, "UserPromptSubmit", later) == [""]
    (request,) = fake_llm.requests[before:]
    assert f"delivery {delivery_id}" not in last_user_text(request["body"])
    assert _all_text(request["body"]).count(f"delivery {delivery_id}") == 1
    assert cli("inbox", "read", "--session", SESSION).stdout == "0 unread follow-up(s)\n"


def test_an_immediate_follow_up_wake_is_not_doubled_by_the_prompt_hook(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The FileChanged wake message itself fires UserPromptSubmit: our hook answers
    nothing there, so the model gets the doorbell only and reads the body once."""
    session_id = _first_turn(claude)
    mark, before = claude.mark(), len(fake_llm.requests)
    # its result line (which the doorbell's summary quotes) is "end": the token is in the
    # body alone, which the model reads once, with `actors inbox read`
    run = actors.spawn(template="sh -c 'echo TOKEN-RUN-IMM; echo end'", session=session_id)
    assert finished(run)["status"] == "done"
    claude.wait_for(
        lambda e: e.get("hook_event") == "FileChanged" and e.get("exit_code") == 2,
        timeout=30,
        after=mark,
    )
    claude.next_result(timeout=60, after=mark)
    (woken,) = fake_llm.requests[before:]
    assert "TOKEN-RUN-IMM" not in _all_text(woken["body"])
    assert _hook_answers(claude, "UserPromptSubmit", mark) == [""]
    read = cli("inbox", "read", "--bodies", "--session", session_id)
    assert read.stdout.startswith("1 unread follow-up(s)\n") and "TOKEN-RUN-IMM" in read.stdout

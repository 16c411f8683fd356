"""Claude Code's messaging socket (2.1.224+), observed live: `-o messaging=socket`.

Claude Code binds a per-session Unix socket and exports its path and token to its hooks;
the SessionStart hook records them. Opted in, the adapter sends the follow-up's text as a
`user` frame; the socket answers nothing, so everything here is asserted on what the
model received (the fake LLM's requests), on Claude's own stream and on our wake log,
where the UserPromptSubmit hook notes the turn the frame started.

The previous pin (2.1.197, `peers/claude-previous`) predates the socket: there the same
opt-in leaves the doorbell to deliver.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import cli, finished
from tests.peers.conftest import doctor_verdicts, peer_bin, register_session
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_claude import ClaudeSession, claude_session

PEER_FRAMING = "Another Claude session sent a message"
"""How Claude Code 2.1.331 introduces a socket message to the model."""


@pytest.fixture
def claude(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    with claude_session(peer_bin("claude"), fake_llm.port, home.path, tmp_path) as session:
        yield session


@pytest.fixture
def claude_previous(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    binary = peer_bin("claude", pin="claude-previous")
    with claude_session(binary, fake_llm.port, home.path, tmp_path) as session:
        yield session


def _opt_in(claude: ClaudeSession, home: StateRoot) -> str:
    """First turn (SessionStart records the socket), then `-o messaging=socket` through
    the real `actors session register`; the Claude session id."""
    claude.send_user("hello TOKEN-FIRST")
    result = claude.next_result(timeout=90)
    assert result["is_error"] is False, result
    session_id = str(result["session_id"])
    options = json.loads(session_paths(home, session_id).record.read_text())["options"]
    socket_path = claude.init_event()["messaging_socket_path"]
    assert options["messaging_socket"] == socket_path  # what the hook saw is what Claude bound
    assert options["messaging_token"]
    register_session(
        "claude_code",
        session_id,
        messaging="socket",
        messaging_socket=socket_path,
        messaging_token=options["messaging_token"],
    )
    return session_id


def test_a_runs_follow_up_through_the_socket_wakes_the_idle_session_with_its_body(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _opt_in(claude, home)
    mark, requests_before = claude.mark(), len(fake_llm.requests)

    spawned = cli("spawn", "-t", "echo TOKEN-RUN-SOCK", "--session", session_id, "--json")
    assert spawned.returncode == 0, spawned.stderr
    run_id = json.loads(spawned.stdout)["run"]
    assert finished(json.loads(spawned.stdout))["status"] == "done"

    # No typing, no doorbell: the frame itself starts a turn whose prompt is the body.
    request = fake_llm.wait_request(
        lambda r: f"\n| Run {run_id} done" in last_user_text(r["body"]),
        requests_before,
        timeout=30,
    )
    prompt = last_user_text(request["body"])
    assert prompt.startswith(PEER_FRAMING), prompt[:200]
    assert "TOKEN-RUN-SOCK" in prompt
    assert f"[actors] follow-up run.done from run:{run_id} · delivery" in prompt
    woken = claude.next_result(timeout=30, after=mark)
    assert woken["is_error"] is False and woken["session_id"] == session_id  # same session
    assert woken["result"] == "ACK TOKEN-RUN-SOCK"

    # Marked read when sent, so the FileChanged doorbell stayed silent for it.
    assert not [e for e in claude.hook_responses("FileChanged", mark) if e.get("exit_code") == 2]
    paths = session_paths(home, session_id)
    assert SessionInbox(paths).unread() == []
    # The UserPromptSubmit hook noted the turn the frame started (the only trace of it).
    ours = [
        e["id"] for e in SessionInbox(paths).entries() if e["envelope"]["from"] == f"run:{run_id}"
    ]
    noted = [r for r in read_jsonl(paths.wakes).records if r.get("via") == "messaging socket"]
    assert [r["ids"] for r in noted] == [ours], (noted, ours)


def test_doctor_judges_the_socket_from_the_turn_it_started(
    claude: ClaudeSession, home: StateRoot
) -> None:
    session_id = _opt_in(claude, home)
    proc = cli("doctor", "delivery", "--session", session_id)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    verdicts = doctor_verdicts(proc.stdout, "claude", setup="-o messaging=socket")
    assert verdicts["D2"] == verdicts["D4"] == verdicts["D5"] == verdicts["D6"] == "pass", (
        proc.stdout
    )
    assert "messaging-socket frame started a turn" in proc.stdout


def test_a_frame_for_another_session_is_dropped_by_claude(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The frame names the Claude session it is for: a socket path that now belongs to
    another session (a reused pid) shows it nowhere."""
    session_id = _opt_in(claude, home)
    record = json.loads(session_paths(home, session_id).record.read_text())
    stale = "0b5e55ed-0000-4000-8000-000000000000"
    register_session("claude_code", stale, **record["options"])
    requests_before, mark = len(fake_llm.requests), claude.mark()
    runner = DeliveryRunner(home)
    envelope = {"type": "run.done", "from": "run:peer", "summary": "stale TOKEN-WRONG"}
    sent = runner.submit(stale, envelope, delivery_id="d-stale")
    assert "sent" in sent["metadata"]["messaging_socket"]
    runner.submit(session_id, {**envelope, "summary": "fresh TOKEN-RIGHT"}, delivery_id="d-fresh")
    fake_llm.wait_request(
        lambda r: "TOKEN-RIGHT" in last_user_text(r["body"]), requests_before, timeout=30
    )
    assert claude.next_result(timeout=30, after=mark)["result"] == "ACK TOKEN-RIGHT"
    seen = [json.dumps(r["body"]) for r in fake_llm.requests[requests_before:]]
    assert not any("TOKEN-WRONG" in body for body in seen)


def test_the_previous_pin_has_no_socket_and_the_doorbell_still_delivers(
    claude_previous: ClaudeSession, home: StateRoot
) -> None:
    """2.1.197 binds no messaging socket: nothing is recorded, and with the opt-in set
    anyway the follow-up arrives the doorbell way."""
    claude = claude_previous
    claude.send_user("hello TOKEN-FIRST")
    result = claude.next_result(timeout=90)
    session_id = str(result["session_id"])
    version = subprocess.run(
        [str(peer_bin("claude", pin="claude-previous")), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert version.stdout.startswith("2.1.197 "), version.stdout
    assert "messaging_socket_path" not in claude.init_event()
    options = json.loads(session_paths(home, session_id).record.read_text()).get("options", {})
    assert "messaging_socket" not in options
    register_session("claude_code", session_id, messaging="socket")
    mark = claude.mark()
    state = DeliveryRunner(home).submit(
        session_id,
        {"type": "run.done", "from": "run:peer", "summary": "old TOKEN-OLD"},
        delivery_id="d-old",
    )
    assert "messaging_socket" not in state.get("metadata", {})
    wake = claude.wait_for(
        lambda e: e.get("hook_event") == "FileChanged" and e.get("exit_code") == 2,
        timeout=30,
        after=mark,
    )
    assert "old TOKEN-OLD" in str(wake.get("stderr"))

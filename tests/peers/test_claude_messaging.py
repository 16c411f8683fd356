"""Claude Code's messaging socket (2.1.224+), observed live: the default wake.

Claude Code binds a per-session Unix socket and exports its path and token to its hooks;
the SessionStart hook records them, UserPromptSubmit the permission mode. A follow-up is
then sent as a `user` frame by default; the socket answers nothing, so everything here is
asserted on what the model received (the fake LLM's requests), on Claude's own stream and
on our wake log, where the UserPromptSubmit hook notes the turn the frame started.

Claude's inbound gate, live: a session that bypasses permissions holds a frame from a
sender that states no permission mode (`peer_message_hold`, cause `no-mode-asserted`),
so there the follow-up rings the doorbell instead, unless `actors install claude-code
--cross-session-inbound accept` set `"crossSessionInbound": "accept"`. Running as root,
`--permission-mode bypassPermissions` needs IS_SANDBOX=1 (Claude's own switch for
sandboxes; this machine's tests run as root).

The previous pin (2.1.197, `peers/claude-previous`) predates the socket: there the same
default leaves the doorbell to deliver.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import cli, finished
from tests.peers.conftest import PIN_IDS, PINS, doctor_verdicts, peer_bin, register_session
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


def _ours(prompt: str) -> str:
    """The socket message in a prompt: from Claude's framing line on (a system reminder
    of Claude's, such as the deferred-tools list once the MCP server is up, may come
    first)."""
    assert PEER_FRAMING in prompt, prompt[:300]
    return prompt[prompt.index(PEER_FRAMING) :]


BYPASS = ("--permission-mode", "bypassPermissions")
SANDBOX = {"IS_SANDBOX": "1"}  # lets bypassPermissions run as root (these tests do)


def _first_turn(claude: ClaudeSession, home: StateRoot, mode: str = "default") -> str:
    """First turn: SessionStart records the socket, UserPromptSubmit the permission mode;
    nothing registered by hand. The Claude session id."""
    claude.send_user("hello TOKEN-FIRST")
    result = claude.next_result(timeout=90)
    assert result["is_error"] is False, result
    session_id = str(result["session_id"])
    options = json.loads(session_paths(home, session_id).record.read_text())["options"]
    socket_path = claude.init_event()["messaging_socket_path"]
    assert options["messaging_socket"] == socket_path  # what the hook saw is what Claude bound
    assert options["messaging_token"]
    assert options["permission_mode"] == mode
    return session_id


def _run_done_state(home: StateRoot, session_id: str, run_id: str) -> dict[str, Any]:
    states = DeliveryRunner(home).states(session_id).values()
    return next(dict(s) for s in states if s.get("type") == "run.done")


def test_a_runs_follow_up_wakes_the_idle_session_through_the_socket_by_default(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _first_turn(claude, home)
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
    prompt = _ours(last_user_text(request["body"]))
    assert "TOKEN-RUN-SOCK" in prompt
    assert f"[actors] follow-up run.done from run:{run_id} · delivery" in prompt
    woken = claude.next_result(timeout=30, after=mark)
    assert woken["is_error"] is False and woken["session_id"] == session_id  # same session
    # the fake model acks each token it read: the follow-up's summary quotes the run's
    # result line, so the token stands in it more than once, and nothing else does
    assert set(woken["result"].split()) == {"ACK", "TOKEN-RUN-SOCK"}, woken["result"]

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
    wake = _run_done_state(home, session_id, run_id)["metadata"]["wake"]
    assert wake.startswith("messaging socket"), wake  # the receipt says which way


@pytest.mark.parametrize("pin", PINS, ids=PIN_IDS)
def test_doctor_judges_the_socket_from_the_turn_it_started(
    pin: str, home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """On the newest pin and the one before it (the level table has a row for each)."""
    with claude_session(peer_bin("claude", pin), fake_llm.port, home.path, tmp_path) as claude:
        session_id = _first_turn(claude, home)
        proc = cli("doctor", "delivery", "--session", session_id)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    assert "wake=messaging socket" in proc.stdout and "inbound_gate" not in proc.stdout
    setup = "messaging socket (default)"
    verdicts = doctor_verdicts(proc.stdout, "claude", pin, setup=setup)
    assert verdicts["D2"] == verdicts["D4"] == verdicts["D5"] == verdicts["D6"] == "pass", (
        proc.stdout
    )
    assert "messaging-socket frame started a turn" in proc.stdout


def test_a_frame_for_another_session_is_dropped_by_claude(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The frame names the Claude session it is for: a socket path that now belongs to
    another session (a reused pid) shows it nowhere."""
    session_id = _first_turn(claude, home)
    record = json.loads(session_paths(home, session_id).record.read_text())
    stale = "0b5e55ed-0000-4000-8000-000000000000"
    register_session("claude_code", stale, **record["options"])
    requests_before, mark = len(fake_llm.requests), claude.mark()
    runner = DeliveryRunner(home)
    envelope = {"type": "run.done", "from": "run:peer", "summary": "stale TOKEN-WRONG"}
    sent = runner.submit(stale, envelope, delivery_id="d-stale")
    assert sent["metadata"]["wake"].startswith("messaging socket"), sent
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
    """2.1.197 binds no messaging socket: nothing is recorded, and even with the socket
    asked for the follow-up arrives the doorbell way."""
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
    assert state["metadata"]["wake"].startswith("doorbell (no messaging socket recorded"), state
    wake = claude.wait_for(
        lambda e: e.get("hook_event") == "FileChanged" and e.get("exit_code") == 2,
        timeout=30,
        after=mark,
    )
    assert "old TOKEN-OLD" in str(wake.get("stderr"))


@pytest.fixture
def claude_bypassing(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    with claude_session(
        peer_bin("claude"), fake_llm.port, home.path, tmp_path, extra_args=BYPASS, extra_env=SANDBOX
    ) as session:
        yield session


def _raw_frame(path: str, session_id: str, text: str) -> None:
    """A frame written straight to the socket, as any sender stating no mode would."""
    frame = {"type": "user", "session_id": session_id, "message": {"role": "user", "content": text}}
    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(path)
        conn.sendall(json.dumps(frame).encode() + b"\n")


def test_a_session_that_bypasses_permissions_is_woken_by_the_doorbell_not_held(
    claude_bypassing: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The gate, live: Claude holds a frame from us in a bypassPermissions session (its
    own `peer_message_hold` event says so), so actors rings the doorbell there instead,
    says so in the receipt, and `actors doctor` explains it and the setting that helps."""
    claude = claude_bypassing
    session_id = _first_turn(claude, home, mode="bypassPermissions")
    mark, requests_before = claude.mark(), len(fake_llm.requests)
    _raw_frame(claude.init_event()["messaging_socket_path"], session_id, "raw TOKEN-HELD")
    held = claude.wait_for(lambda e: e.get("subtype") == "peer_message_hold", 30, after=mark)
    assert held["state"] == "held" and held["cause"] == "no-mode-asserted", held

    spawned = cli("spawn", "-t", "echo TOKEN-RUN-BYPASS", "--session", session_id, "--json")
    assert spawned.returncode == 0, spawned.stderr
    run_id = json.loads(spawned.stdout)["run"]
    assert finished(json.loads(spawned.stdout))["status"] == "done"
    wake = claude.wait_for(
        lambda e: e.get("hook_event") == "FileChanged" and e.get("exit_code") == 2, 30, mark
    )
    assert f"Run {run_id} done" in str(wake.get("stderr"))
    state = _run_done_state(home, session_id, run_id)
    assert state["metadata"]["wake"].startswith("doorbell (messaging socket not used:"), state
    assert "bypassPermissions" in state["metadata"]["wake"]
    claude.next_result(timeout=30, after=mark)
    seen = [json.dumps(r["body"]) for r in fake_llm.requests[requests_before:]]
    assert not any("TOKEN-HELD" in body for body in seen)  # what we did not send stays held

    proc = cli("doctor", "delivery", "--session", session_id)
    assert proc.returncode == 0, proc.stderr
    assert "wake=doorbell (messaging socket not used:" in proc.stdout, proc.stdout
    assert "inbound_gate:" in proc.stdout and '"crossSessionInbound": "accept"' in proc.stdout
    verdicts = doctor_verdicts(proc.stdout, "claude", setup="bypassPermissions (doorbell)")
    assert verdicts["D4"] == verdicts["D6"] == "pass", proc.stdout


def test_accept_set_by_install_lets_the_socket_wake_a_bypassing_session(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    binary = peer_bin("claude")
    with claude_session(
        binary,
        fake_llm.port,
        home.path,
        tmp_path,
        extra_args=BYPASS,
        extra_env=SANDBOX,
        install_args=("--cross-session-inbound", "accept"),
    ) as claude:
        session_id = _first_turn(claude, home, mode="bypassPermissions")
        options = json.loads(session_paths(home, session_id).record.read_text())["options"]
        assert options["inbound"] == "accept"
        mark, requests_before = claude.mark(), len(fake_llm.requests)
        spawned = cli("spawn", "-t", "echo TOKEN-RUN-ACCEPT", "--session", session_id, "--json")
        run_id = json.loads(spawned.stdout)["run"]
        finished(json.loads(spawned.stdout))
        request = fake_llm.wait_request(
            lambda r: f"\n| Run {run_id} done" in last_user_text(r["body"]), requests_before, 30
        )
        assert _ours(last_user_text(request["body"]))
        acked = claude.next_result(timeout=30, after=mark)["result"]
        assert set(acked.split()) == {"ACK", "TOKEN-RUN-ACCEPT"}, acked
        assert not [e for e in claude.events[mark:] if e.get("subtype") == "peer_message_hold"]
        assert _run_done_state(home, session_id, run_id)["metadata"]["wake"].startswith(
            "messaging socket"
        )


def test_a_socket_that_refuses_falls_back_to_the_doorbell_once(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot, tmp_path: Path
) -> None:
    """The recorded socket is dead (a stale path: nobody listens): the follow-up is left
    to the doorbell, which wakes the live session once; nothing lost, nothing doubled."""
    session_id = _first_turn(claude, home)
    dead = tmp_path / "dead.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(dead))
    listener.close()  # the path stays, nobody listens: connect is refused
    paths = session_paths(home, session_id)
    record = json.loads(paths.record.read_text())
    record["options"]["messaging_socket"] = str(dead)
    paths.record.write_text(json.dumps(record))
    mark, requests_before = claude.mark(), len(fake_llm.requests)
    spawned = cli("spawn", "-t", "echo TOKEN-RUN-DEAD", "--session", session_id, "--json")
    run_id = json.loads(spawned.stdout)["run"]
    finished(json.loads(spawned.stdout))
    claude.wait_for(
        lambda e: e.get("hook_event") == "FileChanged" and e.get("exit_code") == 2, 30, mark
    )
    claude.next_result(timeout=30, after=mark)
    state = _run_done_state(home, session_id, run_id)
    assert "Connection refused" in state["metadata"]["wake"], state
    rings = [e for e in claude.hook_responses("FileChanged", mark) if e.get("exit_code") == 2]
    assert len(rings) == 1, rings
    woken = [r for r in fake_llm.requests[requests_before:] if run_id in json.dumps(r["body"])]
    assert woken, "the doorbell did not reach the model"
    prompts = {last_user_text(r["body"]) for r in woken}
    assert len(prompts) == 1, prompts  # one wake turn carried it (retries of it aside)


def test_hostile_text_in_a_follow_up_reaches_the_model_fenced(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot, tmp_path: Path
) -> None:
    """A run's hostile output (forged markers, fences, control characters) through the
    socket into the real Claude's prompt: still fenced, inert, bounded."""
    from tests.reliability.test_attack_fences import assert_fenced, hostile_body

    session_id = _first_turn(claude, home)
    body = tmp_path / "hostile.txt"
    body.write_text(hostile_body())
    requests_before = len(fake_llm.requests)
    record = actors.spawn(template="cat {f}", values={"f": str(body)}, session=session_id)
    assert finished(record)["status"] == "done"
    run_id = str(record["run"])
    request = fake_llm.wait_request(
        lambda r: f"\n| Run {run_id} done" in last_user_text(r["body"]), requests_before, 30
    )
    prompt = last_user_text(request["body"])
    assert_fenced(_ours(prompt), limit=12_000, where="Claude's prompt via the socket")

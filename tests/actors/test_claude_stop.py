"""Claude Code's Stop hook (`actors hook stop`, adapters/claude_code/stop.py) as Claude
runs it: a real `actors` process under a parent process that plays Claude
(tests/conftest.py `stop_hook_as_claude`: its argv is what `claude -p` would have, its
pid is $CLAUDE_PID). The real Claude Code is in tests/peers/test_claude_headless.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import actors
from adapters.claude_code.headless import prints_once
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import AS_CLAUDE, cli, read_fifo_line, stop_hook_as_claude

SESSION = "5e0c4f0e-1a2b-4c3d-8e9f-a0b1c2d3e4f5"


@pytest.mark.parametrize(
    ("args", "once"),
    [
        (["-p", "do it"], True),
        (["--print", "do it", "--output-format", "json"], True),
        (["do it"], False),  # interactive
        (["-p", "--input-format", "stream-json"], False),  # an SDK host feeds prompts
        (["-p", "--input-format=stream-json"], False),
        (["--resume", "x"], False),
    ],
)
def test_only_a_one_turn_print_mode_claude_is_held(args: list[str], once: bool) -> None:
    assert prints_once(args) is once


def _stop(
    active: bool, *claude_args: str, entrypoint: str = "sdk-cli", **env: str
) -> subprocess.CompletedProcess[str]:
    data = {"session_id": SESSION, "hook_event_name": "Stop", "stop_hook_active": active}
    return stop_hook_as_claude(data, *claude_args, entrypoint=entrypoint, **env)


@pytest.fixture
def session(home: StateRoot) -> Path:
    start = json.dumps({"session_id": SESSION, "cwd": "/", "hook_event_name": "SessionStart"})
    assert cli("hook", "session-start", input=start).returncode == 0
    return session_paths(home, SESSION).dir


def _submit(home: StateRoot, token: str) -> None:
    envelope = {"type": "run.done", "from": "run:x", "summary": f"Run {token} done", "body": {}}
    DeliveryRunner(home).submit(SESSION, envelope, delivery_id=f"d-{token}")


def test_a_headless_stop_continues_the_turn_with_unread_follow_ups_once(
    home: StateRoot, session: Path
) -> None:
    _submit(home, "TOKEN-A")
    done = _stop(False, "-p", "coordinate")
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block"
    assert "handed over at Stop" in answer["reason"] and "Run TOKEN-A done" in answer["reason"]
    assert SessionInbox(session_paths(home, SESSION)).unread() == []
    again = _stop(True, "-p", "coordinate")  # the continued turn ends: nothing left
    assert again.stdout == ""


@pytest.mark.parametrize(
    ("claude_args", "entrypoint", "foreign"),
    [
        (("coordinate",), "cli", False),  # interactive
        (("-p", "x"), "cli", False),  # Claude says interactive
        (("-p", "--input-format", "stream-json"), "sdk-cli", False),
        (("-p", "x"), "sdk-cli", True),  # $CLAUDE_PID names a process that is not ours
    ],
)
def test_a_session_that_is_not_a_headless_claude_is_never_held(
    home: StateRoot, session: Path, claude_args: tuple[str, ...], entrypoint: str, foreign: bool
) -> None:
    _submit(home, "TOKEN-B")
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "-p", "x"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        env = {"FAKE_CLAUDE_PID": str(other.pid)} if foreign else {}
        done = _stop(False, *claude_args, entrypoint=entrypoint, **env)
    finally:
        other.communicate(b"")
    assert done.stdout == ""
    assert [e["id"] for e in SessionInbox(session_paths(home, SESSION)).unread()] == ["d-TOKEN-B"]


def test_the_hook_answers_no_more_than_claudes_block_cap(home: StateRoot, session: Path) -> None:
    """Claude drops an answer past CLAUDE_CODE_STOP_HOOK_BLOCK_CAP in a row: the hook
    stops short of it and leaves the follow-up unread."""
    _submit(home, "TOKEN-C1")
    cap = {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "1"}
    assert json.loads(_stop(False, "-p", "x", **cap).stdout)["decision"] == "block"
    _submit(home, "TOKEN-C2")
    done = _stop(True, "-p", "x", **cap)
    assert done.stdout == ""
    assert [e["id"] for e in SessionInbox(session_paths(home, SESSION)).unread()] == ["d-TOKEN-C2"]
    fresh = _stop(False, "-p", "x", **cap)  # a new prompt's turn: counted from zero again
    assert "Run TOKEN-C2 done" in json.loads(fresh.stdout)["reason"]


def test_a_live_run_holds_the_turn_at_most_the_configured_wait(
    home: StateRoot, session: Path
) -> None:
    run = actors.spawn(template="sleep 30", session=SESSION)
    try:
        done = _stop(False, "-p", "x", ACTORS_STOP_WAIT="0.5")
        assert done.stdout == ""  # the wait ran out: the turn ends, the run goes on
        assert "(ACTORS_STOP_WAIT) with runs still live" in done.stderr
        assert actors.status(run["run"])["status"] == "running"
    finally:
        cli("kill", run["run"], "--session", SESSION)


def test_a_count_file_planted_as_a_link_is_never_followed(home: StateRoot, session: Path) -> None:
    """`stop_blocks` replaced by a symlink to a file of the user's: the hook neither reads
    its count through it nor writes through it."""
    elsewhere = session.parent.parent / "precious.json"
    elsewhere.write_text('{"keep": true}')
    (session / "stop_blocks").symlink_to(elsewhere)
    _submit(home, "TOKEN-L1")
    first = _stop(False, "-p", "x")  # a new turn: the count is written afresh, as a file
    assert json.loads(first.stdout)["decision"] == "block"
    assert elsewhere.read_text() == '{"keep": true}'
    assert not (session / "stop_blocks").is_symlink()
    (session / "stop_blocks").unlink()
    (session / "stop_blocks").symlink_to(elsewhere)
    _submit(home, "TOKEN-L2")
    continued = _stop(True, "-p", "x")  # the count cannot be read: nothing is answered
    assert continued.stdout == ""
    assert elsewhere.read_text() == '{"keep": true}'
    assert [e["id"] for e in SessionInbox(session_paths(home, SESSION)).unread()] == ["d-TOKEN-L2"]


def test_a_hook_killed_between_its_answer_and_the_mark_loses_nothing(
    home: StateRoot, session: Path, tmp_path: Path
) -> None:
    """Claude acts on a Stop hook's answer only when it exits 0: one killed after writing
    its answer and before marking the follow-up read has handed over nothing, and the
    follow-up stays unread for the next stop, which hands it over once."""
    import os
    import signal

    _submit(home, "TOKEN-K")
    barrier = tmp_path / "barrier.fifo"
    os.mkfifo(barrier)
    event = {"session_id": SESSION, "hook_event_name": "Stop", "stop_hook_active": False}
    base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE")}
    env = {**base, "CLAUDE_CODE_ENTRYPOINT": "sdk-cli",
           "ACTORS_PAUSE_AT": "boundary.after_answer", "ACTORS_PAUSE_FIFO": str(barrier)}  # fmt: skip
    claude = subprocess.Popen(
        [sys.executable, "-c", AS_CLAUDE, "-p", "x"], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    assert claude.stdin is not None
    claude.stdin.write(json.dumps(event))
    claude.stdin.close()
    pid, point = read_fifo_line(barrier).split()
    assert point == "boundary.after_answer"
    os.kill(int(pid), signal.SIGKILL)  # the answer is written, nothing is marked yet
    claude.wait(timeout=30)
    paths = session_paths(home, SESSION)
    assert [e["id"] for e in SessionInbox(paths).unread()] == ["d-TOKEN-K"]
    again = _stop(False, "-p", "x")
    assert "Run TOKEN-K done" in json.loads(again.stdout)["reason"]
    assert SessionInbox(paths).unread() == []
    records = [json.loads(line) for line in paths.deliveries.read_text().splitlines()]
    stops = [r for r in records if (r.get("metadata") or {}).get("boundary") == "Stop"]
    assert len(stops) == 1

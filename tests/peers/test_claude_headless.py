"""A headless `claude -p` coordinator (the real pinned Claude Code, the fake model on
127.0.0.1) waits in its Stop hook for the runs it started and goes on with their
follow-ups (adapters/claude_code/stop.py); a session fed prompts on stdin, and the
interactive Claude in a tmux pane, are never held.

The coordinator spawns its run through the Bash tool (the fake model answers
`[tool:Bash:CMD]` with that tool call). The run is `cat` on a FIFO the test holds, so it
ends exactly when the test writes to it: no timing guess.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.views.index import list_runs
from tests.conftest import cli
from tests.peers.conftest import doctor_verdicts, peer_bin
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_claude import (
    MODEL,
    ClaudeSession,
    claude_env,
    claude_session,
    install_actors,
)


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    path = tmp_path / "gate.fifo"
    os.mkfifo(path)
    return path


def _release(gate: Path) -> None:
    """End the run: its `cat` reads one line and the FIFO's end."""
    with open(gate, "w") as writer:
        writer.write("TOKEN-RUN-OUT\n")


@pytest.fixture
def headless(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path, gate: Path
) -> Iterator[ClaudeSession]:
    """`claude -p PROMPT` (one turn, then the process ends) whose model spawns the gated run."""
    base = tmp_path / "claude-p"
    config_dir, home_dir, cwd = base / "config", base / "home", base / "project"
    for directory in (config_dir, home_dir, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    env = claude_env(config_dir, home_dir, fake_llm.port, home.path)
    install_actors(env, cwd)
    prompt = f"coordinate [tool:Bash:actors spawn -t 'cat {gate}'] TOKEN-START"
    command = [
        str(peer_bin("claude")), "-p", prompt, "--output-format", "stream-json", "--verbose",
        "--include-hook-events", "--allowedTools", "Bash", "--model", MODEL,
    ]  # fmt: skip
    stderr_path = base / "claude.stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=stderr, start_new_session=True,
        )  # fmt: skip
    session = ClaudeSession(proc=proc, config_dir=config_dir, cwd=cwd, stderr_path=stderr_path)
    try:
        session.start_reader()
        yield session
    finally:
        session.close()


def _stop_started(claude: ClaudeSession, after: int = 0) -> int:
    """Wait until Claude runs the Stop hook; the index just past that event."""
    claude.wait_for(
        lambda e: e.get("subtype") == "hook_started" and e.get("hook_event") == "Stop",
        timeout=90,
        after=after,
    )
    return claude.mark()


def _the_run(home: StateRoot) -> dict[str, object]:
    (run,) = list_runs(home)
    return dict(run)


def test_a_headless_coordinator_waits_for_its_run_and_goes_on_with_its_follow_up(
    headless: ClaudeSession, fake_llm: FakeLLM, home: StateRoot, gate: Path
) -> None:
    _stop_started(headless)
    run = _the_run(home)
    session_id = str(run["owner_id"])
    record = json.loads(session_paths(home, session_id).record.read_text())
    assert record["options"]["headless"] == "true"  # SessionStart saw a `claude -p`
    before = len(fake_llm.requests)
    # the turn has ended and its Stop hook holds it: the process is still there
    assert headless.proc.poll() is None
    assert run["status"] == "running"

    _release(gate)
    request = fake_llm.wait_request(lambda r: str(run["run"]) in json.dumps(r["body"]), before, 60)
    text = last_user_text(request["body"])
    assert "handed over at Stop" in text and f"Run {run['run']} done" in text
    assert "<run-data nonce=" in text  # fenced like every other hand-over
    assert headless.proc.wait(timeout=60) == 0  # nothing left: the second Stop lets it end
    result = [e for e in headless.events if e.get("type") == "result"][-1]
    assert result["is_error"] is False, result

    # exactly once: read in the inbox, one `delivered` record, at the Stop boundary
    paths = session_paths(home, session_id)
    assert SessionInbox(paths).unread() == []
    records = [
        json.loads(line) for line in paths.deliveries.read_text().splitlines() if line.strip()
    ]
    delivered = [r["metadata"] for r in records if r["event"] == "delivered"]
    assert delivered.count({"boundary": "Stop", "body_injected": True}) == 1, records
    # the runner's own attempt, when it came before the hook took the follow-up: no socket
    for metadata in delivered:
        assert "boundary" in metadata or metadata["wake"].startswith("doorbell (a headless")
    carrying = [r for r in fake_llm.requests[before:] if str(run["run"]) in json.dumps(r["body"])]
    assert len({last_user_text(r["body"]) for r in carrying}) == 1  # one hand-over


def test_a_headless_coordinator_whose_run_is_killed_ends_without_another_turn(
    headless: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    _stop_started(headless)
    run = _the_run(home)
    before = len(fake_llm.requests)
    assert headless.proc.poll() is None  # held while the run lives
    killed = cli("kill", str(run["run"]), "--session", str(run["owner_id"]))
    assert killed.returncode == 0, killed.stderr
    # an intentional stop owes no follow-up: the hook sees the runner gone and lets go
    assert headless.proc.wait(timeout=60) == 0
    assert len(fake_llm.requests) == before
    assert DeliveryRunner(home).states(str(run["owner_id"])) == {}


def test_doctor_judges_a_headless_session_from_the_turn_its_stop_hook_continued(
    headless: ClaudeSession, home: StateRoot, gate: Path
) -> None:
    """Run from outside while the coordinator waits: the probe continues the held turn
    (D4-D6) and that turn's end, the next Stop, is the completion reply (D7)."""
    _stop_started(headless)
    run = _the_run(home)
    proc = cli("doctor", "delivery", "--session", str(run["owner_id"]))
    assert proc.returncode == 0, proc.stderr
    # the hook took it before the delivery runner's attempt, or after it: never the socket
    assert "wake=the Stop hook" in proc.stdout or "wake=doorbell (a headless" in proc.stdout
    verdicts = doctor_verdicts(proc.stdout, "claude", setup="headless claude -p (Stop hook)")
    assert {verdicts[d] for d in ("D2", "D4", "D5", "D6", "D7")} == {"pass"}, proc.stdout
    assert "the Stop hook continued the finished turn" in proc.stdout
    assert headless.proc.poll() is None  # its run is still live: held again
    _release(gate)
    assert headless.proc.wait(timeout=60) == 0


@pytest.fixture
def streamed(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    extra = ("--allowedTools", "Bash")
    with claude_session(
        peer_bin("claude"), fake_llm.port, home.path, tmp_path, extra_args=extra
    ) as session:
        yield session


def test_a_session_fed_prompts_on_stdin_is_never_held_by_its_stop_hook(
    streamed: ClaudeSession, home: StateRoot, gate: Path
) -> None:
    """`claude -p --input-format stream-json` (an SDK host, like a user, sends the next
    prompt): its Stop hook answers at once while its run is live, and the session keeps
    the messaging socket for the wake."""
    streamed.send_user(f"spawn [tool:Bash:actors spawn -t 'cat {gate}'] TOKEN-S")
    result = streamed.next_result(timeout=90)
    assert result["is_error"] is False, result
    (answered,) = streamed.hook_responses("Stop")
    assert answered["exit_code"] == 0 and answered["stdout"] == ""
    run = _the_run(home)
    assert run["status"] == "running"  # the turn ended with the run live: not held
    record = json.loads(session_paths(home, str(run["owner_id"])).record.read_text())
    assert "headless" not in record["options"]
    _release(gate)


def test_an_interactive_claudes_stop_hook_never_holds_its_turn(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path, gate: Path
) -> None:
    """The real interactive Claude Code (its TUI in a tmux pane on a private server): its
    model spawns a run that stays live, its turn ends, and the next prompt typed into it
    reaches the model at once. A held Stop hook would queue that prompt behind the run."""
    base = tmp_path / "tui"
    config_dir, home_dir, cwd = base / "config", base / "home", base / "project"
    for directory in (config_dir, home_dir, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    env = claude_env(config_dir, home_dir, fake_llm.port, home.path)
    install_actors(env, cwd)
    # past the first start's checks, as a user's config is: onboarding done, the folder
    # trusted, the API key approved (bench/bench_wake.py does the same for hcom's rows)
    state = config_dir / ".claude.json"
    seen = json.loads(state.read_text()) if state.exists() else {}
    seen.update(
        customApiKeyResponses={"approved": [env["ANTHROPIC_API_KEY"][-20:]]},
        hasCompletedOnboarding=True,
        lastOnboardingVersion="2.1.331",
        projects={str(cwd): {"hasTrustDialogAccepted": True}},
    )
    state.write_text(json.dumps(seen))
    prompt = f"spawn [tool:Bash:actors spawn -t 'cat {gate}'] TOKEN-TUI"
    command = shlex.join(
        ["env", *[f"{k}={v}" for k, v in {**env, "TERM": "xterm-256color"}.items()],
         str(peer_bin("claude")), "--allowedTools", "Bash", "--model", MODEL, prompt]
    )  # fmt: skip
    server = f"actors-claude-tui-{os.getpid()}"
    tmux_env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    subprocess.run(
        ["tmux", "-L", server, "new-session", "-d", "-s", "c", "-x", "140", "-y", "40",
         "-c", str(cwd), command],
        check=True, env=tmux_env,
    )  # fmt: skip
    try:
        # the tool's result goes back to the model: the run is spawned, the turn ends
        try:
            fake_llm.wait_request(lambda r: "run:run-" in json.dumps(r["body"]), 0, 90)
        except TimeoutError:
            screen = subprocess.run(["tmux", "-L", server, "capture-pane", "-p", "-t", "c"],
                                    capture_output=True, text=True, env=tmux_env).stdout  # fmt: skip
            raise AssertionError(f"no spawn reached the model; the screen:\n{screen}") from None
        run = _the_run(home)
        record = json.loads(session_paths(home, str(run["owner_id"])).record.read_text())
        assert "headless" not in record["options"]
        before = len(fake_llm.requests)
        subprocess.run(["tmux", "-L", server, "send-keys", "-t", "c", "next TOKEN-NEXT"],
                       check=True, env=tmux_env)  # fmt: skip
        subprocess.run(["tmux", "-L", server, "send-keys", "-t", "c", "Enter"],
                       check=True, env=tmux_env)  # fmt: skip
        fake_llm.wait_request(lambda r: "TOKEN-NEXT" in json.dumps(r["body"]), before, 60)
        assert _the_run(home)["status"] == "running"  # answered while the run still lives
        assert not session_paths(home, str(run["owner_id"])).stop_blocks.exists()
    finally:
        _release(gate)
        subprocess.run(["tmux", "-L", server, "kill-server"], check=False, env=tmux_env)

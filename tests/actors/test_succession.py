"""A Claude Code conversation that goes on under another session id (`/clear`) or comes
back (`claude --resume`), through the real hook commands fed the JSON Claude Code sends
(captured from Claude Code 2.1.331: SessionStart `source` startup / clear / compact /
resume, the same process for the first three). This test process stands for the Claude
process: the hooks it runs record it as their harness process. The real Claude Code:
tests/peers/test_mcp_claude.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.core.process import wait_gone
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, idle_run, make_fifo, read_fifo_line, wait_stopped
from tests.reliability._attack import gated_run, release

OLD = "47021988-3b05-483b-9420-8e5d90f419e7"
NEW = "b12f7417-5498-4db0-9cf3-b660459d8624"
OTHER = "5c0ffee0-0000-4000-8000-000000000026"


def start_input(session: str, source: str, cwd: Path) -> str:
    data: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(cwd / f"{session}.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": "SessionStart",
        "source": source,
    }
    if source == "resume":
        data.update(seconds_since_last_response=1, context_tokens=12)
    return json.dumps(data)


def session_start(session: str, source: str, cwd: Path, *, own_process: bool = False) -> str:
    """`actors hook session-start` as Claude Code runs it; its additionalContext. With
    `own_process`, from another process than this one (a new Claude process)."""
    command = [sys.executable, "-m", "actors", "hook", "session-start"]
    if own_process:  # the hook's harness process is then this intermediate python
        command = [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])"]
        command += [sys.executable, "-m", "actors", "hook", "session-start"]
    done = subprocess.run(
        command,
        input=start_input(session, source, cwd),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()  # one answer, whatever was handed over
    return str(json.loads(line)["hookSpecificOutput"]["additionalContext"])


def unread(session: str) -> str:
    """The session's unread follow-ups (envelopes, JSON), left unread."""
    return cli("inbox", "read", "--session", session, "--peek", "--json").stdout


def unread_count(session: str) -> int:
    return len(json.loads(unread(session)))


def test_after_clear_the_new_id_keeps_the_old_ids_runs_and_follow_ups(
    home: StateRoot, tmp_path: Path
) -> None:
    session_start(OLD, "startup", tmp_path)
    users = idle_run(tmp_path)  # a live run of the local user's: not the conversation's
    before = finished(actors.spawn(template="echo TOKEN-BEFORE-CLEAR", session=OLD))
    actors.spawn(template="sleep 300", as_="run:held", session=OLD)
    gated, go = gated_run(tmp_path, "ends-later", "echo TOKEN-AFTER-CLEAR", session=OLD)
    assert unread_count(OLD) == 1

    context = session_start(NEW, "clear", tmp_path)
    # the old id's unread follow-up came along, handed over with the answer, once
    assert "TOKEN-BEFORE-CLEAR" in context and before["run"] in context
    assert unread_count(OLD) == 0 and unread_count(NEW) == 0
    assert cli("inbox", "read", "--session", OLD).stdout == "0 unread follow-up(s)\n"

    # the new id controls the old id's runs (and only those), without --force
    stopped = cli("kill", "run:held", "--session", NEW)
    assert stopped.returncode == 0, stopped.stderr
    refused = cli("kill", users["run"], "--session", NEW)
    assert refused.returncode == 2 and "--force" in refused.stderr
    stranger = cli("kill", gated["run"], "--session", OTHER)
    assert stranger.returncode == 2 and f"belongs to {OLD}" in stranger.stderr

    # a run of the old id that ends now follows up to the new one and rings its wake file
    release(go)
    assert finished(gated)["status"] == "done"
    (envelope,) = json.loads(unread(NEW))
    assert envelope["from"] == f"run:{gated['run']}"
    assert unread_count(OLD) == 0
    wake = home.sessions / NEW / "wake"
    delivery = envelope.get("idempotency_key") or envelope["id"]
    assert delivery in wake.read_text()  # the file Claude Code's FileChanged watches
    event = {"session_id": NEW, "hook_event_name": "FileChanged", "event": "change"}
    ringing = cli("hook", "file-changed", input=json.dumps({**event, "file_path": str(wake)}))
    assert ringing.returncode == 2 and "1 unread follow-up(s)" in ringing.stderr
    read = cli("inbox", "read", "--session", NEW)
    assert read.stdout.startswith("1 unread follow-up(s)") and "TOKEN-AFTER-CLEAR" in read.stdout
    assert cli("inbox", "read", "--session", OLD).stdout == "0 unread follow-up(s)\n"
    assert cli("inbox", "read", "--session", NEW).stdout == "0 unread follow-up(s)\n"


def test_resume_hands_over_what_arrived_while_the_session_was_dead_once(
    home: StateRoot, tmp_path: Path
) -> None:
    session_start(OLD, "startup", tmp_path)
    done = finished(actors.spawn(template="echo TOKEN-WHILE-DEAD", session=OLD))
    assert unread_count(OLD) == 1
    context = session_start(OLD, "resume", tmp_path, own_process=True)  # a new process
    assert "TOKEN-WHILE-DEAD" in context and done["run"] in context
    assert "not instructions from the user" in context  # fenced as run-written data
    assert unread_count(OLD) == 0
    again = session_start(OLD, "compact", tmp_path, own_process=True)
    assert "TOKEN-WHILE-DEAD" not in again
    journal = (home.sessions / OLD / "deliveries.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in journal]
    handed = [r for r in records if (r.get("metadata") or {}).get("boundary") == "SessionStart"]
    assert len(handed) == 1 and handed[0]["observed"] == ["queued", "injected"]


def test_only_the_same_harness_process_makes_a_successor(home: StateRoot, tmp_path: Path) -> None:
    """Another Claude process starting a session takes nothing from the one this process
    served; a session started again (resumed elsewhere) gets its own follow-ups again."""
    session_start(OLD, "startup", tmp_path)
    actors.spawn(template="sleep 300", as_="run:mine", session=OLD)
    session_start(OTHER, "startup", tmp_path, own_process=True)
    refused = cli("kill", "run:mine", "--session", OTHER)
    assert refused.returncode == 2 and f"belongs to {OLD}" in refused.stderr
    session_start(NEW, "clear", tmp_path)
    session_start(OLD, "resume", tmp_path, own_process=True)
    done = finished(actors.spawn(template="echo TOKEN-RESUMED", session=OLD))
    assert done["run"] in unread(OLD) and unread_count(NEW) == 0
    assert cli("kill", "run:mine", "--session", NEW).returncode == 0  # still NEW's lineage


def test_a_follow_up_racing_the_clear_lands_once_in_the_new_session(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner appended its follow-up to the old id and stopped (ACTORS_PAUSE_AT)
    before journaling it; `/clear` moves it meanwhile. Once the runner goes on, the
    follow-up is in the new session once (handed over with the clear), the old journal
    ends it as `moved`, and nothing is unread anywhere."""
    session_start(OLD, "startup", tmp_path)
    barrier = make_fifo(tmp_path / "barrier")
    point = "delivery.submit.after_inbox"
    monkeypatch.setenv("ACTORS_PAUSE_AT", point)
    monkeypatch.setenv("ACTORS_PAUSE_FIFO", str(barrier))
    run = actors.spawn(template="echo TOKEN-RACE", session=OLD)
    monkeypatch.delenv("ACTORS_PAUSE_AT")
    monkeypatch.delenv("ACTORS_PAUSE_FIFO")
    pid_text, reached = read_fifo_line(barrier).split()
    runner = int(pid_text)
    assert reached == point
    wait_stopped(runner)
    assert unread_count(OLD) == 1

    context = session_start(NEW, "clear", tmp_path)
    assert "TOKEN-RACE" in context
    os.kill(runner, signal.SIGCONT)
    assert wait_gone([runner], timeout=60)
    assert actors.status(run["run"])["status"] == "done"

    def last_state(session: str) -> dict[str, str]:
        lines = (home.sessions / session / "deliveries.jsonl").read_text().splitlines()
        return {r["id"]: r["state"] for r in map(json.loads, lines)}

    (delivery,) = last_state(OLD)
    assert last_state(OLD)[delivery] == "moved"
    assert last_state(NEW)[delivery] == "delivered"
    lines = (home.sessions / NEW / "inbox.jsonl").read_text().splitlines()
    appended = [r for r in map(json.loads, lines) if r["id"] == delivery and "envelope" in r]
    assert len(appended) == 1
    assert unread_count(OLD) == 0 and unread_count(NEW) == 0


def test_registering_the_session_again_keeps_what_it_succeeded(
    home: StateRoot, tmp_path: Path
) -> None:
    """`actors session register` replaces how a session is reached; it used to replace the
    whole record, so re-registering the session a /clear made dropped its `predecessors`
    and with them its control of the old id's runs."""
    session_start(OLD, "startup", tmp_path)
    actors.spawn(template="sleep 300", as_="run:before-clear", session=OLD)
    session_start(NEW, "clear", tmp_path)
    record = home.sessions / NEW / "session.json"
    first = json.loads(record.read_text())
    assert first["predecessors"] == [OLD]

    again = cli("session", "register", "--id", NEW, "--harness", "file")
    assert again.returncode == 0, again.stderr
    now = json.loads(record.read_text())
    assert now["harness"] == "file" and now["predecessors"] == [OLD]
    assert now["created_at"] == first["created_at"]
    stopped = cli("kill", "run:before-clear", "--session", NEW)
    assert stopped.returncode == 0, stopped.stderr

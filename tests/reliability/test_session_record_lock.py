"""session.json is read, changed and written by several processes at once: the harness
hooks of one session (SessionStart, UserPromptSubmit, PreToolUse), `actors session
register`, `actors mcp`, a spawn recording its socket. Each change is one update under
the session's `.session.lock` (runtime.delivery.sessions.update_session), so a writer
that lands between another's read and write waits instead of being overwritten.

The first writer is stopped with its new record written to a temporary file but not
yet renamed over session.json (`files.atomic.after_tmp`, runtime/core/faults.py: a
point between its read and its write, on the old code too). Then a second process
changes the record. Before the lock, the second finished at once and the first, going
on, put back the record it had read: the second's change was lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import runtime.core.faults
from runtime.store.appends import locked
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, wait_for_change, wait_stopped

assert not runtime.core.faults.ARMED  # the fault hook never pauses this process

SESSION = "0d6c2f1e-lock-test"


def _record(home: StateRoot) -> dict[str, object]:
    return dict(json.loads(session_paths(home, SESSION).record.read_text()))


def _start(
    argv: list[str], data: dict[str, object] | None, env: dict[str, str]
) -> subprocess.Popen[str]:
    """`actors ARGV...` with `data` as JSON on its stdin (a hook's input), or none."""
    with tempfile.TemporaryFile("w+") as given:
        given.write(json.dumps(data) if data is not None else "")
        given.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "actors", *argv],
            stdin=given,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )


def _finished(process: subprocess.Popen[str]) -> str:
    """Its stderr, once it exited 0."""
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return err


def _paused_at(barrier: Path) -> int:
    wait_for_change(
        barrier.parent,
        lambda: barrier.exists() and barrier.read_text().endswith("\n"),
        what=f"a process to report at {barrier}",
    )
    pid = int(barrier.read_text().split()[0])
    wait_stopped(pid)
    return pid


def _blocked_in_flock(pid: int) -> bool:
    """Whether `pid` waits for a lock: the kernel lists a blocked flock() in /proc/locks
    as a `->` line with the waiter's pid."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid):
            return True
    return False


def _exited_or_waiting(process: subprocess.Popen[str], timeout: float = 30) -> None:
    """Until `process` has exited (no lock stopped it: the old code) or waits in flock()
    (the lock held by the stopped writer). A bounded condition wait, re-checked every
    5 ms: neither a process blocking in flock() nor /proc/locks gives an event to wait on."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and not _blocked_in_flock(process.pid):
        assert time.monotonic() < deadline, f"pid {process.pid} neither exited nor waited"
        time.sleep(0.005)


Writer = tuple[list[str], "dict[str, object] | None", dict[str, str]]
"""`actors ARGV...`, its stdin data and its environment."""


def race_a_paused_writer(first: Writer, second: Writer, barrier: Path) -> None:
    """`first` (its environment pauses it at a point between its read and its write,
    reporting at `barrier`) is stopped there; `second` runs until it exits or waits for
    a lock; then `first` goes on. Both must exit 0; neither outlives this call."""
    paused = _start(*first)
    other: subprocess.Popen[str] | None = None
    try:
        assert _paused_at(barrier) == paused.pid
        other = _start(*second)
        _exited_or_waiting(other)
        os.kill(paused.pid, signal.SIGCONT)
        _finished(paused)
        _finished(other)
    finally:
        for process in (paused, other):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate(timeout=30)


SECOND_WRITERS = {
    # the first prompt of the session records its permission mode (SessionStart drops it)
    "user-prompt-submit": (
        ["hook", "user-prompt-submit"],
        {"session_id": SESSION, "permission_mode": "plan", "prompt": "hi"},
    ),
    # a registration by hand replaces the record the hook is rewriting
    "session register": (
        ["session", "register", "--harness", "file", "--id", SESSION, "-o", "mode=manual"],
        None,
    ),
}


@pytest.mark.parametrize("writer", sorted(SECOND_WRITERS))
def test_a_record_update_racing_a_session_start_is_kept(
    home: StateRoot, tmp_path: Path, writer: str
) -> None:
    """A SessionStart hook stopped between its read and its write of session.json; then
    another writer changes the record. On the old code that change was overwritten when
    the hook went on; now the other writer waits for the hook's update and applies its
    own to the record the hook wrote."""
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "ACTORS_HOOK_LOCK_WAIT": "60"}
    first = {"session_id": SESSION, "cwd": str(tmp_path), "transcript_path": "/t/first"}
    assert cli("hook", "session-start", input=json.dumps(first), env=env).returncode == 0
    assert _record(home)["transcript_path"] == "/t/first"

    barrier = tmp_path / "barrier"
    paused = {"ACTORS_PAUSE_AT": "files.atomic.after_tmp", "ACTORS_PAUSE_FIFO": str(barrier)}
    again = {**first, "transcript_path": "/t/again"}
    second_argv, second_data = SECOND_WRITERS[writer]
    race_a_paused_writer(
        (["hook", "session-start"], again, {**env, **paused}),
        (second_argv, second_data, env),
        barrier,
    )
    record = _record(home)
    if writer == "user-prompt-submit":  # both updates are in the record
        assert record["transcript_path"] == "/t/again", record
        assert record["options"] == {"permission_mode": "plan"}, record  # type: ignore[comparison-overlap]
    else:  # the registration came last, and replaced the record whole
        assert record["harness"] == "file", record
        assert record["options"] == {"mode": "manual"}, record  # type: ignore[comparison-overlap]
        assert "transcript_path" not in record, record


def test_a_hook_gives_up_on_a_held_record_lock_within_its_wait(
    home: StateRoot, tmp_path: Path
) -> None:
    """Another process holds the session's record lock (stopped, stuck): each hook that
    would change the record waits ACTORS_HOOK_LOCK_WAIT, then goes on without it and
    exits 0 with one line on stderr; the record is left exactly as it was. (On the old
    code the hooks took no lock and rewrote the record.)"""
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "ACTORS_HOOK_LOCK_WAIT": "1"}
    first = {"session_id": SESSION, "cwd": str(tmp_path), "transcript_path": "/t/first"}
    assert cli("hook", "session-start", input=json.dumps(first), env=env).returncode == 0
    paths = session_paths(home, SESSION)
    before = paths.record.read_bytes()
    hooks = {
        "session-start": {**first, "transcript_path": "/t/again"},
        "user-prompt-submit": {"session_id": SESSION, "permission_mode": "plan", "prompt": "x"},
        "pre-tool-use": {"session_id": SESSION, "permission_mode": "auto", "tool_name": "Bash"},
    }
    with locked(paths.record_lock):
        for name, data in hooks.items():
            started = time.monotonic()
            done = cli("hook", name, input=json.dumps(data), env=env, timeout=60)
            took = time.monotonic() - started
            assert done.returncode == 0, (name, done.stderr)
            assert ".session.lock" in done.stderr and done.stderr.count("\n") == 1, done.stderr
            assert took < 30, f"{name} waited {took:.1f}s for a lock it may wait 1s for"
            assert paths.record.read_bytes() == before, name
    # the lock free again, the next prompt records its mode
    prompt = json.dumps(hooks["user-prompt-submit"])
    assert cli("hook", "user-prompt-submit", input=prompt, env=env).returncode == 0
    assert _record(home)["options"] == {"permission_mode": "plan"}  # type: ignore[comparison-overlap]


def test_an_update_that_writes_nothing_leaves_no_session_behind(home: StateRoot) -> None:
    """A hook that finds nothing to record for a session never registered (its change
    returns None) creates no directory, no lock file."""
    from runtime.delivery.sessions import update_session

    found = update_session(home, "never-registered", lambda record: None)
    assert found["registered"] is False
    assert not session_paths(home, "never-registered").dir.exists()

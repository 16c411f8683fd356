"""Issue 26 #8: nothing waits, unbounded, on a lock that a stopped process holds.

CI deadlocked once: a runner paused by the fault hook inside its first journal append
held events.jsonl's flock while the in-process `actors.spawn` that started it waited for
the same lock to record `run.start`; pytest-timeout failed the test 600 s later and the
cleanup's `actors kill` hung on the lock too. Spawn now writes nothing to a journal once
its runner exists, kill needs no lock before it acts, and every lock wait is bounded
where it must be (the test suite sets ACTORS_LOCK_BOUND, so a lock held by a paused
process fails the waiter in seconds, naming the lock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import actors
import runtime.core.faults
from runtime.store.layout import StateRoot
from tests.conftest import cli, wait_for_change, wait_stopped, write_recipe

assert not runtime.core.faults.ARMED  # the fault hook never pauses this process


def _paused_at(barrier: Path, timeout: float = 30) -> int:
    wait_for_change(
        barrier.parent,
        lambda: barrier.exists() and barrier.read_text().endswith("\n"),
        timeout,
        what=f"a process to report at {barrier}",
    )
    pid = int(barrier.read_text().split()[0])
    wait_stopped(pid)
    return pid


def test_spawn_returns_while_its_runner_is_stopped_in_a_journal_append(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner stops itself holding events.jsonl's lock before spawn has returned.
    On 4ee217d spawn then waited for that lock forever (its `run.start` append)."""
    barrier = tmp_path / "barrier"
    monkeypatch.setenv("ACTORS_PAUSE_AT", "files.append.before_write")
    monkeypatch.setenv("ACTORS_PAUSE_FIFO", str(barrier))
    recipe = write_recipe(tmp_path, "held", {"template": "sleep 300"})
    started = time.monotonic()
    record = actors.spawn(str(recipe), as_="held")
    took = time.monotonic() - started
    monkeypatch.delenv("ACTORS_PAUSE_AT")
    monkeypatch.delenv("ACTORS_PAUSE_FIFO")
    assert _paused_at(barrier) == record["pid"]
    assert took < 10, f"spawn took {took:.1f}s while its runner held a journal lock"
    events = (home.run("held").events).read_text().splitlines()
    assert json.loads(events[0])["event"] == "run.start"
    proc = cli("kill", "held", timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_a_lock_held_by_a_stopped_sender_fails_the_next_one_by_name(
    home: StateRoot, tmp_path: Path
) -> None:
    """A sender stopped inside its append holds the run's inbox lock. The next sender
    (with the test bound at 2 s) exits 2 with one line naming the locked journal, instead
    of waiting for a process that will never go on."""
    recipe = write_recipe(
        tmp_path, "idle", {"mailbox": {"accepts": ["job.item"]}, "template": "sleep 300"}
    )
    actors.spawn(str(recipe), as_="idle")
    barrier = tmp_path / "barrier"
    env = {"ACTORS_PAUSE_AT": "mailbox.append.after_ring", "ACTORS_PAUSE_FIFO": str(barrier)}
    stopped = subprocess.Popen(
        [sys.executable, "-m", "actors", "message", "run:idle", "job.item", "first"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _paused_at(barrier)
        started = time.monotonic()
        proc = cli(
            "message", "run:idle", "job.item", "second", env={"ACTORS_LOCK_BOUND": "2"}, timeout=60
        )
        took = time.monotonic() - started
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith("actors: ") and proc.stderr.count("\n") == 1, proc.stderr
        assert "inbox.jsonl" in proc.stderr and "locked" in proc.stderr, proc.stderr
        assert took < 30, f"the second sender waited {took:.1f}s"
    finally:
        stopped.kill()
        stopped.wait(timeout=30)
    assert cli("kill", "idle", timeout=30).returncode == 0

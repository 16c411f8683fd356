"""Issue 17 #1, siblings of test_attack_signals: every signal site (reconcile, kill,
cancel) reaches only processes proven to be the run's at that instant.

Each test puts a process that is not the run's where a recorded number would point, and
asserts it survives, while the run's own processes (proven through the live runner, or
through the marks the runner puts in every command's environment) are still stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.core.process import wait_gone
from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line, write_recipe
from tests.reliability.test_attack_signals import (
    Victim,
    _finished_looking_run,
    _rewrite,
    _stat,
)

IDLE = {
    "template": 'sh -c \'sleep 300 & echo $! > "$2"; echo ready > "$1"; exec sleep 300\' i {f} {p}'
}


def _idle(tmp_path: Path, run_id: str) -> tuple[dict[str, object], Victim]:
    """A live run whose command backgrounds a `sleep` (its grandchild) and idles."""
    fifo, pidfile = make_fifo(tmp_path / f"{run_id}.ready"), tmp_path / f"{run_id}.pid"
    recipe = write_recipe(tmp_path, f"idle-{run_id}", IDLE)
    spawned = actors.spawn(str(recipe), as_=run_id, values={"f": str(fifo), "p": str(pidfile)})
    assert read_fifo_line(fifo) == "ready"
    pid = int(pidfile.read_text())
    stat = _stat(pid)
    assert stat is not None
    return spawned, Victim(pid, stat[1])


def _orphan_with_env(env: dict[str, str]) -> Iterator[tuple[Victim, int]]:
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        env=dict(os.environ, **env),
    )
    out, _ = leader.communicate(timeout=10)
    victim = Victim(int(out.decode().strip()), leader.pid)
    yield victim, leader.pid
    victim.kill()


@pytest.fixture
def setsid_sleep() -> Iterator[Victim]:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    victim = Victim(proc.pid, proc.pid)
    yield victim
    victim.kill()
    proc.wait()


def _edit_sid(home: StateRoot, run_id: str, sid: int) -> None:
    path = home.run(run_id).run_json
    run = json.loads(path.read_text())
    run["process_identity"]["sid"] = sid
    _rewrite(path, run)


@pytest.mark.parametrize("verb", [["kill"], ["cancel", "--grace", "0"], ["cancel"]])
def test_kill_and_cancel_spare_a_session_named_in_an_edited_run_json(
    home: StateRoot, tmp_path: Path, setsid_sleep: Victim, verb: list[str]
) -> None:
    """The live runner is verified, so its *current* session is what is stopped; the
    session id written in run.json (here an unrelated program's) is never used."""
    _spawned, child = _idle(tmp_path, "live")
    _edit_sid(home, "live", setsid_sleep.sid)
    proc = cli(verb[0], "live", *verb[1:])
    assert proc.returncode == 0, proc.stderr
    assert setsid_sleep.alive(), f"`actors {verb[0]}` killed an unrelated session"
    assert not child.alive(), "the run's own grandchild survived"


def test_reconcile_spares_a_process_carrying_another_runs_marks(
    home: StateRoot, tmp_path: Path
) -> None:
    """A member of the recycled session whose environment names another run (or another
    state directory) is not this run's orphan."""
    path, run = _finished_looking_run(home, "other")
    marks = {
        "ACTORS_RUN_INSTANCE": "not-" + run["run_instance_id"],
        "ACTORS_STATE_DIR": str(path.parent),
    }
    gen = _orphan_with_env(marks)
    victim, dead_leader = next(gen)
    try:
        run["process_identity"].update(pid=dead_leader, pgid=dead_leader, sid=dead_leader)
        _rewrite(path, run)
        cli("reconcile", "--json")
        assert victim.alive(), "reconcile killed a process of another run instance"
    finally:
        gen.close()


def test_reconcile_spares_a_marked_process_older_than_the_runner(
    home: StateRoot, tmp_path: Path
) -> None:
    """Even with the run's marks, a process that started before the runner cannot be one
    of its descendants (a forged run.json naming an older program's session)."""
    state_dir = home.run("older").dir
    gen = _orphan_with_env({"ACTORS_STATE_DIR": str(state_dir), "ACTORS_RUN_INSTANCE": "x"})
    victim, dead_leader = next(gen)
    try:
        path, run = _finished_looking_run(home, "older")
        run["run_instance_id"] = "x"
        run["process_identity"].update(pid=dead_leader, pgid=dead_leader, sid=dead_leader)
        _rewrite(path, run)
        cli("reconcile", "--json")
        assert victim.alive(), "reconcile killed a process older than the run's runner"
    finally:
        gen.close()


def test_reconcile_spares_a_live_runs_children_named_by_a_forged_run(
    home: StateRoot, tmp_path: Path
) -> None:
    """A finished-looking run whose run.json copies a live run's session and instance:
    that session still has its leader (the live runner), so it is no orphan."""
    _spawned, child = _idle(tmp_path, "alive")
    live = json.loads(home.run("alive").run_json.read_text())
    path, run = _finished_looking_run(home, "copycat")
    run["run_instance_id"] = live["run_instance_id"]
    run["process_identity"]["sid"] = live["process_identity"]["pid"]
    _rewrite(path, run)
    cli("reconcile", "--json")
    assert child.alive(), "a forged run aimed reconcile at a live run's children"
    assert actors.status("alive")["status"] == "running"
    actors.kill("alive")


def test_reconcile_still_kills_the_proven_orphans_of_a_dead_runner(
    home: StateRoot, tmp_path: Path
) -> None:
    """Issue 18 depends on it: the runner SIGKILLed, its command and the command's
    background child are found through their marks and stopped."""
    _spawned, child = _idle(tmp_path, "orphans")
    run = json.loads(home.run("orphans").run_json.read_text())
    runner = run["process_identity"]["pid"]
    os.kill(runner, signal.SIGKILL)
    assert wait_gone([runner], timeout=30)
    proc = cli("reconcile", "--json")
    assert proc.returncode == 0, proc.stderr
    assert not child.alive(), "the dead runner's orphan survived reconcile"
    assert actors.status("orphans")["status"] == "exited"

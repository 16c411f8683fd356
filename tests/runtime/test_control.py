"""Cancel, kill, runner death and stale pids, against real process trees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import alive, cli, make_fifo, read_fifo_line, write_recipe

FORKER = (
    'sh -c \'for i in $(seq 20); do sleep 300 & echo $! >> "$1"; done; '
    'echo ready > "$2"; wait\' forker {pids} {fifo}'
)


def start_forker(home: StateRoot, tmp_path: Path) -> tuple[str, list[int]]:
    fifo = make_fifo(tmp_path / "ready.fifo")
    pids_file = tmp_path / "pids"
    record = actors.spawn(template=FORKER, values={"pids": str(pids_file), "fifo": str(fifo)})
    assert read_fifo_line(fifo) == "ready"
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 20 and all(alive(p) for p in pids)
    return record["run"], pids


def test_kill_leaves_no_descendant_alive(home: StateRoot, tmp_path: Path) -> None:
    run_id, pids = start_forker(home, tmp_path)
    proc = cli("kill", run_id)
    assert proc.returncode == 0, proc.stderr
    assert f"run:{run_id}  killed" in proc.stdout
    assert [p for p in pids if alive(p)] == []
    assert actors.status(run_id)["status"] == "killed"
    result = actors.result(run_id)
    assert result["killed"] is True and result["code"] == 137


def test_cancel_stops_gracefully_and_reports_cancelled(home: StateRoot, tmp_path: Path) -> None:
    run_id, pids = start_forker(home, tmp_path)
    proc = cli("cancel", run_id, "--grace", "3")
    assert proc.returncode == 0, proc.stderr
    assert actors.status(run_id)["status"] == "cancelled"
    assert [p for p in pids if alive(p)] == []
    events = [
        json.loads(line)["event"] for line in home.run(run_id).events.read_text().splitlines()
    ]
    assert "run.cancel" in events and "run.cancelled" in events


def test_cancel_of_a_run_that_ignores_sigterm_escalates_to_kill(
    home: StateRoot, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template='sh -c \'trap "" TERM; echo ready > "$1"; while :; do sleep 1; done\' x {f}',
        values={"f": str(fifo)},
    )
    assert read_fifo_line(fifo) == "ready"
    summary = actors.cancel(record["run"], grace=0.5)
    assert summary["status"] == "cancelled"


def test_runner_killed_from_outside_is_exited(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}", values={"f": str(fifo)}
    )
    assert read_fifo_line(fifo) == "ready"
    os.kill(record["pid"], signal.SIGKILL)
    final = actors.wait(record["run"], timeout=30)
    assert final["status"] == "exited"


@pytest.mark.parametrize("held_by", ["cgroup", "identity"])
def test_stale_pid_is_refused_and_the_stranger_untouched(
    home: StateRoot,
    tmp_path: Path,
    stray_process: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
    held_by: str,
) -> None:
    """run.json names a stranger's pid. Without a cgroup the runner cannot be proven:
    refused, nothing signalled. With one, the run's own processes are found by the
    kernel's record and stopped, and the stranger is still untouched."""
    from runtime.core import cgroups

    if held_by == "cgroup" and cgroups.parent_dir() is None:
        pytest.skip("no delegated cgroup v2 here")
    monkeypatch.setenv("ACTORS_CGROUP", "auto" if held_by == "cgroup" else "off")
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}", values={"f": str(fifo)}
    )
    assert read_fifo_line(fifo) == "ready"
    paths = home.run(record["run"])
    run = json.loads(paths.run_json.read_text())
    real_pid = run["pid"]
    run["pid"] = stray_process.pid
    run["process_identity"]["pid"] = stray_process.pid
    paths.run_json.write_text(json.dumps(run))
    if held_by == "cgroup":
        proc = cli("kill", record["run"])
        assert proc.returncode == 0, proc.stderr
        assert not alive(real_pid), "the run's real runner survived its kill"
        proc = cli("cancel", record["run"])
        assert proc.returncode == 2 and "already finished" in proc.stderr, proc.stderr
    else:
        for verb in ("kill", "cancel"):
            proc = cli(verb, record["run"])
            assert proc.returncode == 2
            assert "now belongs to another process" in proc.stderr
            assert "Traceback" not in proc.stderr
    assert stray_process.poll() is None
    assert actors.status(record["run"])["status"] != "running"
    os.kill(real_pid, signal.SIGKILL)


def test_finished_run_cannot_be_cancelled(home: StateRoot) -> None:
    record = actors.spawn(template="true")
    actors.wait(record["run"], timeout=30)
    proc = cli("cancel", record["run"])
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"actors: run {record['run']} already finished (done)")


def test_another_sessions_run_is_refused_without_force(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}",
        values={"f": str(fifo)},
        session="coordinator-a",
    )
    assert read_fifo_line(fifo) == "ready"
    refused = cli("kill", record["run"], env={"ACTORS_SESSION": "coordinator-b"})
    assert refused.returncode == 2
    assert "belongs to coordinator-a, not coordinator-b" in refused.stderr
    assert actors.status(record["run"])["status"] == "running"
    forced = cli("kill", record["run"], "--force", env={"ACTORS_SESSION": "coordinator-b"})
    assert forced.returncode == 0, forced.stderr


def test_a_run_can_kill_itself_through_its_token_but_not_a_sibling(
    home: StateRoot, tmp_path: Path
) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    sibling = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}", values={"f": str(fifo)}
    )
    assert read_fifo_line(fifo) == "ready"
    out = tmp_path / "attempt.txt"
    import sys

    attacker = actors.spawn(
        template=f'sh -c \'{sys.executable} -m actors kill "$1" > "$2" 2>&1; echo $? >> "$2"\' x {{target}} {{out}}',
        values={"target": sibling["run"], "out": str(out)},
    )
    actors.wait(attacker["run"], timeout=30)
    text = out.read_text()
    assert "refusing to kill" in text and text.strip().endswith("2")
    assert actors.status(sibling["run"])["status"] == "running"
    self_kill = actors.spawn(template=f"sh -c '{sys.executable} -m actors kill \"$ACTORS_RUN_ID\"'")
    assert actors.wait(self_kill["run"], timeout=30)["status"] == "killed"


@pytest.mark.parametrize("verb", ["kill", "cancel", "status", "result", "tail"])
def test_unknown_run_is_a_clear_error(home: StateRoot, verb: str) -> None:
    proc = cli(verb, "run:nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "actors: no run nope; `actors ls` lists the runs"


def test_ids_are_written_by_a_recipe_into_write_recipe_paths(
    home: StateRoot, tmp_path: Path
) -> None:
    path = write_recipe(tmp_path, "echoer", {"template": "echo {word}"})
    record = actors.spawn(str(path), values={"word": "x"})
    assert record["recipe"] == "echoer"
    assert record["recipe_file"] == str(path)


def test_kill_reaches_a_descendant_that_left_the_session(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    pidfile = tmp_path / "escapee.pid"
    escape = tmp_path / "escape.sh"
    escape.write_text('echo $$ > "$1"; echo ready > "$2"; exec sleep 300\n')
    record = actors.spawn(
        template='sh -c \'setsid sh "$0" "$1" "$2" & wait\' {script} {p} {f}',
        values={"script": str(escape), "p": str(pidfile), "f": str(fifo)},
    )
    assert read_fifo_line(fifo) == "ready"
    escapee = int(pidfile.read_text())
    assert os.getsid(escapee) == escapee  # it left the run's session
    actors.kill(record["run"])
    assert not alive(escapee)


def test_stopped_leaves_are_journaled_as_cancelled(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}", values={"f": str(fifo)}
    )
    assert read_fifo_line(fifo) == "ready"
    actors.cancel(record["run"], grace=2)
    events = [json.loads(line) for line in home.run(record["run"]).events.read_text().splitlines()]
    done = [e for e in events if e["event"] == "command.done"]
    assert [e["status"] for e in done] == ["cancelled"]
    progress = json.loads(home.run(record["run"]).progress.read_text())
    assert progress["phase"] == "cancelled" and progress["failed"] == 0


def test_session_flag_is_refused_inside_a_run(home: StateRoot, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    import sys

    record = actors.spawn(
        template=f'sh -c \'{sys.executable} -m actors ls --mine --session someone > "$1" 2>&1; echo $? >> "$1"\' x {{o}}',
        values={"o": str(out)},
    )
    actors.wait(record["run"], timeout=30)
    text = out.read_text()
    assert "--session cannot be used inside a run" in text and text.strip().endswith("2")

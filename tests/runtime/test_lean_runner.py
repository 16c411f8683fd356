"""The lean runner (runtime.runs.lean): a single-command run supervised without trio,
parked by exec() into an idle image that imports nothing, and ending exactly as a run
on the trio runner does. Real runners, real process groups, real signals."""

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
from runtime.core.process import verify, wait_gone
from runtime.store.layout import StateRoot
from tests.conftest import (
    finished,
    make_fifo,
    read_fifo_line,
    runner_at_rest,
    runner_mode,
    write_recipe,
)

VOLATILE = {"run", "run_instance_id", "created_at", "started_at", "ended_at", "duration_ms"}


def _events(home: StateRoot, run: str) -> list[dict[str, Any]]:
    lines = home.run(run).events.read_text().splitlines()
    return [json.loads(line) for line in lines]


def _live_in_session(sid: int) -> list[int]:
    """Live (not zombie) processes of session `sid`."""
    from runtime.core.process import read_stat

    found = []
    for name in os.listdir("/proc"):
        stat = read_stat(int(name)) if name.isdigit() else None
        if stat is not None and stat.sid == sid and stat.state not in ("Z", "X"):
            found.append(stat.pid)
    return found


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise AssertionError("no Pss line")


def _spawn_parked(home: StateRoot, template: str, **kw: Any) -> dict[str, Any]:
    record = actors.spawn(template=template, **kw)
    assert runner_at_rest(home, record) == "lean"  # parked
    return record


def _comparable(home: StateRoot, run: str) -> dict[str, Any]:
    result = json.loads(home.run(run).result.read_text())
    text = json.dumps({k: v for k, v in result.items() if k not in VOLATILE})
    return json.loads(text.replace(f"/runs/{run}/", "/runs/RUN/"))


def test_an_idle_run_is_parked_in_an_image_that_imports_nothing(home: StateRoot) -> None:
    record = _spawn_parked(home, "sleep 300")
    pid = record["pid"]
    # the parked image keeps the recorded identity: pid, start time, argv, cwd
    assert verify(record["process_identity"])[0] == "valid"
    assert actors.status(record["run"])["status"] == "running"
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "site-packages/trio" not in maps and "pydantic_core" not in maps
    idle = "import time; print('idle', flush=True); time.sleep(300)"
    bare = subprocess.Popen([sys.executable, "-P", "-c", idle], stdout=subprocess.PIPE, text=True)
    try:
        assert bare.stdout is not None and bare.stdout.readline() == "idle\n"  # started
        # within 1 MB of a bare interpreter (an idle trio runner is ~10 MB above it)
        assert _pss_kb(pid) < _pss_kb(bare.pid) + 1024
    finally:
        bare.kill()
        bare.communicate()


def test_output_and_a_secret_split_across_a_park_are_kept_and_masked(
    home: StateRoot, tmp_path: Path
) -> None:
    go = make_fifo(tmp_path / "go.fifo")
    secret = "s3cr3t-value-XYZ"
    script = f"printf 'line one\\npart s3cr3t'; read x < {go}; printf -- '-value-XYZ end\\n'"
    record = actors.spawn(
        template=f"sh -c {json.dumps(script)} x {{tok}}",
        values={"tok": secret},
        secret_names=["tok"],
    )
    assert runner_at_rest(home, record) == "lean"  # parked
    with open(go, "w") as writer:
        writer.write("go\n")
    summary = finished(record)
    assert summary["status"] == "done"
    log = home.run(record["run"]).stdout.read_text()
    assert log == "line one\npart *** end\n"
    assert secret not in log


@pytest.mark.parametrize("how", ["cancel", "kill", "control.stop", "control.kill", "SIGTERM"])
def test_a_parked_run_is_stopped_with_its_whole_group(home: StateRoot, how: str) -> None:
    record = _spawn_parked(home, "sh -c 'sleep 300 & sleep 300'")
    run, pid = record["run"], record["pid"]
    if how == "cancel":
        actors.cancel(run)
    elif how == "kill":
        actors.kill(run)
    elif how == "SIGTERM":
        os.kill(pid, signal.SIGTERM)
    else:
        actors.message(f"run:{run}", how)
    summary = finished(record)
    want = {"cancel": "cancelled", "control.stop": "cancelled", "SIGTERM": "cancelled"}
    assert summary["status"] == want.get(how, "killed")
    assert wait_gone([pid], timeout=10)
    assert wait_gone(_live_in_session(pid), timeout=10), "the run's session is not empty"
    if how == "SIGTERM":
        assert any(e["event"] == "run.signal" for e in _events(home, run))


@pytest.mark.parametrize("mode", ["lean", "trio"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_sent_as_soon_as_spawn_returns_cancels_the_run(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, mode: str, sig: signal.Signals
) -> None:
    """The pid spawn returns is signalled before the runner has installed its handler:
    the signal waits (spawn starts the runner with it blocked) and cancels the run, as
    later; it used to kill the runner outright (`exited`, no result, no follow-up)."""
    if mode == "trio":
        monkeypatch.setenv("ACTORS_TRIO_RUNNER", "1")
    record = actors.spawn(template="sh -c 'sleep 300 & sleep 300'")
    os.kill(record["pid"], sig)
    summary = finished(record)
    assert summary["status"] == "cancelled", summary
    assert runner_mode(home, record["run"]) == mode
    assert any(e["event"] == "run.signal" for e in _events(home, record["run"]))
    assert wait_gone(_live_in_session(record["pid"]), timeout=10), "the session is not empty"


CASES = {
    "done": "sh -c 'echo out; echo err >&2'",
    "failed": "sh -c 'echo why >&2; exit 3'",
    "missing": "no-such-command-xyz",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lean_and_trio_runs_end_with_the_same_result(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    results = {}
    for mode in ("lean", "trio"):
        if mode == "trio":
            monkeypatch.setenv("ACTORS_TRIO_RUNNER", "1")
        record = actors.spawn(template=CASES[case])
        finished(record)
        assert runner_mode(home, record["run"]) == mode
        results[mode] = _comparable(home, record["run"])
        events = [e["event"] for e in _events(home, record["run"])]
        assert events[-2:] == [f"run.{results[mode]['status']}", "followup.delivered"] or (
            events[-1] == f"run.{results[mode]['status']}"
        )
    assert results["lean"] == results["trio"]


def test_a_timeout_reached_while_parked_ends_as_under_trio(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # long enough that a loaded machine still sees the runner parked before it runs out
    recipe = write_recipe(tmp_path, "slow", {"template": "sleep 300", "timeout": "4s"})
    results = {}
    for mode in ("lean", "trio"):
        if mode == "trio":
            monkeypatch.setenv("ACTORS_TRIO_RUNNER", "1")
        record = actors.spawn(str(recipe))
        if mode == "lean":
            assert runner_at_rest(home, record) == "lean"  # parked
        finished(record)
        results[mode] = _comparable(home, record["run"])
    assert results["lean"]["reason"] == "timed out after 4000 ms"
    assert results["lean"] == results["trio"]


def test_a_graph_of_more_than_one_command_runs_on_trio(home: StateRoot) -> None:
    record = actors.spawn(template="echo a")
    finished(record)
    assert runner_mode(home, record["run"]) == "lean"
    fifo = make_fifo(Path(os.environ["ACTORS_HOME"]).parent / "seq.fifo")
    recipe = write_recipe(
        Path(os.environ["ACTORS_HOME"]).parent,
        "two",
        {"template": [f"sh -c 'echo ready > {fifo}'", "true"]},
    )
    record = actors.spawn(str(recipe))
    assert read_fifo_line(fifo) == "ready"
    finished(record)
    assert runner_mode(home, record["run"]) == "trio"


@pytest.mark.parametrize("mode", ["lean", "trio"])
def test_a_descriptor_the_caller_passed_down_does_not_reach_the_command(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "trio":
        monkeypatch.setenv("ACTORS_TRIO_RUNNER", "1")
    stray = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(stray, True)  # the runner inherits it from spawn
    try:
        probe = f"sh -c '[ -e /proc/self/fd/{stray} ] && echo leaked || echo closed'"
        record = actors.spawn(template=probe)
        finished(record)
    finally:
        os.close(stray)
    assert runner_mode(home, record["run"]) == mode
    assert home.run(record["run"]).stdout.read_text() == "closed\n"


@pytest.mark.parametrize("stray", ["wait 3 - 4", "resume 3 15", "garbage"])
def test_a_runner_state_in_the_callers_environment_is_not_inherited(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, stray: str
) -> None:
    """ACTORS_RUNNER_STATE is a parked runner's own; a caller whose environment has one
    (a careless export, a hostile parent) must not send a new runner into a parked or
    resumed image it never made."""
    monkeypatch.setenv("ACTORS_RUNNER_STATE", stray)
    record = actors.spawn(template="echo fine")
    assert finished(record)["status"] == "done"
    assert runner_mode(home, record["run"]) == "lean"

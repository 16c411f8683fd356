"""One runner for every recipe (runtime.runner.loop, runtime.runner.graph): any graph is
supervised on one poll() loop and, when idle, parked by exec() into an image that imports
nothing (runtime.runner.park), and picked up again on any event. Real runners, real
process groups, real signals."""

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
    runner_parked,
    write_recipe,
)


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


@pytest.fixture
def bare_pss() -> Any:
    """The PSS of a bare idle interpreter on this machine, the yardstick of a parked run."""
    idle = "import time; print('idle', flush=True); time.sleep(300)"
    bare = subprocess.Popen([sys.executable, "-P", "-c", idle], stdout=subprocess.PIPE, text=True)
    try:
        assert bare.stdout is not None and bare.stdout.readline() == "idle\n"  # started
        yield _pss_kb(bare.pid)
    finally:
        bare.kill()
        bare.communicate()


SLEEP = "sleep 300"
KINDS: dict[str, dict[str, Any]] = {
    "leaf": {"template": SLEEP},
    "sequence": {"template": [SLEEP, "true"]},
    "parallel": {"parallel": True, "template": [SLEEP, SLEEP, SLEEP, SLEEP]},
    "parallel-concurrency": {"parallel": True, "concurrency": 2, "template": [SLEEP] * 4},
    "repeat": {"template": [{"template": SLEEP, "repeat": 3}]},
    "repeat-parallel": {"template": [{"template": SLEEP, "repeat": 3, "parallel": True}]},
    "when": {"template": [{"template": SLEEP, "when": "{go}"}, "true"], "values": {"go": "yes"}},
    "retry-recover": {
        "template": [
            {
                "template": 'sh -c \'test -e "$1" || { touch "$1"; exit 1; }; exec sleep 300\' '
                "x {marker}",
                "retry": 2,
                "recover": "true",
            }
        ]
    },
    "timeout": {"template": [{"template": SLEEP, "timeout": "300s"}]},
    "min-successful": {"parallel": True, "min_successful": 1, "template": [SLEEP, SLEEP]},
    "failure-branch": {
        "parallel": True,
        "template": [{"template": "false", "failure": "branch"}, SLEEP],
    },
    "delay": {"template": [{"template": "true", "delay": "300s"}]},
    "retire-when": {
        "retire_when": "children_terminal",
        "template": "sh -c 'actors spawn -t \"sleep 300\" >/dev/null; exec sleep 300'",
    },
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_idle_run_of_every_node_kind_is_parked(
    home: StateRoot, tmp_path: Path, kind: str, bare_pss: int
) -> None:
    """Whatever its graph, an idle run's runner parks: the one runner's mode is recorded,
    the parked image keeps the recorded identity (pid, start time, argv, cwd), imports
    nothing (no trio, no pydantic mapped) and costs within 1 MB of a bare interpreter."""
    recipe = write_recipe(tmp_path, kind, KINDS[kind])
    values = {"marker": str(tmp_path / "marker")} if kind == "retry-recover" else {}
    record = actors.spawn(str(recipe), values=values)
    if kind == "retire-when" and os.environ.get("ACTORS_PORTABLE"):
        # on the portable path its child's exit watch is a thread, which exec() would
        # end: a runner guarding a run it spawned stays up there (docs/architecture.md)
        assert runner_mode(home, record["run"]) == "poll"
        actors.kill(record["run"])
        return
    assert runner_at_rest(home, record) == "poll"
    pid = int(record["pid"])
    assert verify(record["process_identity"])[0] == "valid"
    assert actors.status(record["run"])["status"] == "running"
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "site-packages/trio" not in maps and "pydantic_core" not in maps
    assert _pss_kb(pid) < bare_pss + 1024
    actors.kill(record["run"])
    assert finished(record)["status"] == "killed"
    assert wait_gone(_live_in_session(pid), timeout=10), "the run's session is not empty"


def test_a_fan_out_is_finished_across_parks(home: StateRoot, tmp_path: Path) -> None:
    """Branches end while the runner is parked, one at a time; each wakes it, it parks
    again, and the joined output and the result are whole."""
    gates = [make_fifo(tmp_path / f"go{i}") for i in range(2)]
    recipe = write_recipe(
        tmp_path,
        "fan",
        {
            "parallel": True,
            "template": [
                {"label": f"b{i}", "template": f"sh -c 'read x < {gate}; echo branch-{i}'"}
                for i, gate in enumerate(gates)
            ],
        },
    )
    record = actors.spawn(str(recipe))
    for gate in gates:
        runner_at_rest(home, record)
        with open(gate, "w") as writer:
            writer.write("go\n")
    summary = finished(record)
    assert summary["status"] == "done"
    result = json.loads(home.run(record["run"]).result.read_text())
    assert result["output"] == (
        "--- branch: b0 status: done ---\nbranch-0\n--- branch: b1 status: done ---\nbranch-1\n"
    )
    assert result["completed"] == 2


def test_a_step_and_a_delay_continue_after_a_park(home: StateRoot, tmp_path: Path) -> None:
    """A sequence parked inside its first step goes on to a delayed second step whose
    delay passes while parked; the second step reads the first's output."""
    gate = make_fifo(tmp_path / "go")
    recipe = write_recipe(
        tmp_path,
        "steps",
        {"template": [f"sh -c 'read x < {gate}; echo first'", {"template": "cat", "delay": "1s"}]},
    )
    record = actors.spawn(str(recipe))
    runner_at_rest(home, record)
    with open(gate, "w") as writer:
        writer.write("go\n")
    assert finished(record)["status"] == "done"
    assert json.loads(home.run(record["run"]).result.read_text())["output"] == "first\n"


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
    runner_at_rest(home, record)
    with open(go, "w") as writer:
        writer.write("go\n")
    summary = finished(record)
    assert summary["status"] == "done"
    log = home.run(record["run"]).stdout.read_text()
    assert log == "line one\npart *** end\n"
    assert secret not in log


@pytest.mark.parametrize("how", ["cancel", "kill", "control.stop", "control.kill", "SIGTERM"])
@pytest.mark.parametrize("graph", ["leaf", "parallel"])
def test_a_parked_run_is_stopped_with_its_whole_group(
    home: StateRoot, tmp_path: Path, how: str, graph: str
) -> None:
    command = "sh -c 'sleep 300 & sleep 300'"
    template: Any = command if graph == "leaf" else [command, command]
    recipe = write_recipe(tmp_path, graph, {"template": template, "parallel": graph != "leaf"})
    record = actors.spawn(str(recipe))
    runner_at_rest(home, record)
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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_sent_as_soon_as_spawn_returns_cancels_the_run(
    home: StateRoot, sig: signal.Signals
) -> None:
    """The pid spawn returns is signalled before the runner has installed its handler:
    the signal waits (spawn starts the runner with it blocked) and cancels the run, as
    later; it used to kill the runner outright (`exited`, no result, no follow-up)."""
    record = actors.spawn(template="sh -c 'sleep 300 & sleep 300'")
    os.kill(record["pid"], sig)
    summary = finished(record)
    assert summary["status"] == "cancelled", summary
    assert runner_mode(home, record["run"]) == "poll"
    assert any(e["event"] == "run.signal" for e in _events(home, record["run"]))
    assert wait_gone(_live_in_session(record["pid"]), timeout=10), "the session is not empty"


@pytest.mark.parametrize("inner", [False, True], ids=["root", "inner-node"])
def test_a_timeout_reached_while_parked(home: StateRoot, tmp_path: Path, inner: bool) -> None:
    # long enough that a loaded machine still sees the runner parked before it runs out
    node = {"template": "sleep 300", "timeout": "4s"}
    recipe = write_recipe(tmp_path, "slow", {"template": [node, "true"]} if inner else node)
    record = actors.spawn(str(recipe))
    runner_at_rest(home, record)
    summary = finished(record)
    result = json.loads(home.run(record["run"]).result.read_text())
    assert result["code"] == 124 and summary["status"] == "failed"
    assert "timed out after 4000 ms" in result["reason"]
    assert not runner_parked(int(record["pid"]))


def test_a_descriptor_the_caller_passed_down_does_not_reach_the_command(
    home: StateRoot,
) -> None:
    stray = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(stray, True)  # the runner inherits it from spawn
    try:
        probe = f"sh -c '[ -e /proc/self/fd/{stray} ] && echo leaked || echo closed'"
        record = actors.spawn(template=probe)
        finished(record)
    finally:
        os.close(stray)
    assert home.run(record["run"]).stdout.read_text() == "closed\n"


def test_no_descriptor_of_a_parked_runner_reaches_a_later_command(
    home: StateRoot, tmp_path: Path
) -> None:
    """Across a park every runner descriptor is inheritable for the exec; none of them
    may reach a command started after the wake."""
    gate = make_fifo(tmp_path / "go")
    out = tmp_path / "fds"
    recipe = write_recipe(
        tmp_path,
        "fds",
        {"template": [f"sh -c 'read x < {gate}'", f"sh -c 'ls /proc/self/fd > {out}'"]},
    )
    record = actors.spawn(str(recipe))
    runner_at_rest(home, record)
    with open(gate, "w") as writer:
        writer.write("go\n")
    assert finished(record)["status"] == "done"
    fds = sorted(int(n) for n in out.read_text().split())
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds  # 0-2, and ls's own directory


@pytest.mark.parametrize("stray", ["wait 3 - 4 15", "resume 3 15", "garbage"])
def test_a_runner_state_in_the_callers_environment_is_not_inherited(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, stray: str
) -> None:
    """ACTORS_RUNNER_STATE is a parked runner's own; a caller whose environment has one
    (a careless export, a hostile parent) must not send a new runner into a parked or
    resumed image it never made."""
    monkeypatch.setenv("ACTORS_RUNNER_STATE", stray)
    record = actors.spawn(template="echo fine")
    assert finished(record)["status"] == "done"
    assert runner_mode(home, record["run"]) == "poll"


def test_a_parked_run_still_answers_its_inbox(home: StateRoot, tmp_path: Path) -> None:
    """A message to a parked run's own script wakes its consumer, not the runner: the
    runner listens only to `control.*` and stays parked."""
    ready = make_fifo(tmp_path / "ready")
    recipe = write_recipe(
        tmp_path,
        "echoer",
        {
            "mailbox": {"accepts": ["job.item"]},
            "template": f"sh -c 'echo up > {ready}; actors recv --json --timeout 60'",
        },
    )
    record = actors.spawn(str(recipe))
    assert read_fifo_line(ready) == "up"
    runner_at_rest(home, record)
    actors.message(f"run:{record['run']}", "job.item", {"n": 1})
    assert finished(record)["status"] == "done"
    assert '"job.item"' in home.run(record["run"]).stdout.read_text()


def _descendants(pid: int) -> list[int]:
    """Every descendant of `pid`, found as Copilot CLI finds an MCP server's: `pgrep -P`
    down the tree."""
    found: list[int] = []
    todo = [pid]
    while todo:
        done = subprocess.run(
            ["pgrep", "-P", str(todo.pop())], capture_output=True, text=True, timeout=30
        )
        children = [int(p) for p in done.stdout.split()]
        found += children
        todo += children
    return found


def test_a_run_outlives_its_spawner_whose_whole_process_tree_is_killed(
    home: StateRoot, tmp_path: Path
) -> None:
    """Copilot CLI ends an MCP server by killing every process `pgrep -P` finds below
    it, whatever its session. A runner the server spawned is not in that tree
    (runtime.runs.launch starts it from a child that exits at once), so the run goes on
    and ends with its own outcome, not with the harness."""
    import select

    ready, go = make_fifo(tmp_path / "ready"), make_fifo(tmp_path / "go")
    program = (
        "import actors, sys; actors.spawn(template=sys.argv[1], as_='run:kept');"
        " print('spawned', flush=True); sys.stdin.read()"
    )
    template = f"sh -c 'echo up > {ready}; cat {go}'"
    with subprocess.Popen(
        [sys.executable, "-c", program, template],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as spawner:
        try:
            readable, _, _ = select.select([spawner.stdout], [], [], 60)
            assert readable and spawner.stdout is not None, "the spawner never spawned"
            assert spawner.stdout.readline() == "spawned\n"
            assert read_fifo_line(ready) == "up"  # the run's command is running
            record = actors.status("kept")
            tree = _descendants(spawner.pid)
            assert record["pid"] not in tree, (record["pid"], tree)
            for pid in [*tree, spawner.pid]:  # as Copilot does: each one, SIGTERM
                os.kill(pid, signal.SIGTERM)
            spawner.wait(timeout=30)
        finally:
            spawner.kill()
    # the command is still there to read what it waits for (ENXIO if it had died)
    writer = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, b"TOKEN-KEPT\n")
    finally:
        os.close(writer)
    assert finished(dict(record))["status"] == "done"
    assert "TOKEN-KEPT" in home.run("kept").stdout.read_text()

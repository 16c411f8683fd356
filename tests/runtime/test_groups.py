"""Issue 28, capacity without a daemon: groups with a parallel limit, queued runs that
start in FIFO order when a slot frees (also when a member's runner or a queued run is
SIGKILLed), `--after` dependencies, `actors restart` and `actors group run`.

Every run is a real runner; each command that must stay busy blocks on a FIFO the test
writes when it wants it to end (never a sleep), and every wait is on the run's files.
"""

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
from runtime.core import platform
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import cli, finished, make_fifo, runner_parked, wait_for_change, write_recipe

SESSION = "coord"


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = cli(*args, "--session", SESSION) if args[0] in ("spawn", "restart") else cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


def blocked(home: StateRoot, run: str, *more: str) -> Path:
    """Spawn run `run`, whose one command blocks until its FIFO is written."""
    gate = make_fifo(home.path.parent / f"{run}.fifo")
    ok("spawn", "-t", "cat {gate}", "-v", f"gate={gate}", "--as", run, *more)
    return gate


def release(gate: Path) -> None:
    fd = os.open(gate, os.O_WRONLY)  # the run's `cat` holds the read end: no wait
    os.write(fd, b"go\n")
    os.close(fd)


def status(run: str) -> str:
    return str(actors.status(run)["status"])


def wait_status(home: StateRoot, run: str, wanted: str, timeout: float = 60) -> None:
    wait_for_change(
        home.run(run).dir, lambda: status(run) == wanted, timeout, what=f"{run} {wanted}"
    )


def events(home: StateRoot, run: str) -> list[dict[str, Any]]:
    return read_jsonl(home.run(run).events).records


def named(home: StateRoot, run: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events(home, run) if e.get("event") == name]


def group_view(name: str) -> dict[str, Any]:
    (found,) = [g for g in json.loads(ok("group", "ls", "--json").stdout) if g["group"] == name]
    return found


def done(run: str) -> dict[str, Any]:
    return finished({"run": run, "pid": actors.status(run)["pid"]})


def inbox(home: StateRoot) -> list[dict[str, Any]]:
    return [e["envelope"] for e in SessionInbox(session_paths(home, SESSION)).entries()]


# -- a group's limit, its queue, FIFO order -----------------------------------------------


def test_past_the_limit_a_spawn_returns_at_once_queued_and_starts_in_fifo_order(
    home: StateRoot,
) -> None:
    ok("group", "set", "g", "--parallel", "2")
    gates = {run: blocked(home, run, "--group", "g") for run in ("r1", "r2")}
    for run in ("r1", "r2"):
        wait_status(home, run, "running")
    queued = {}
    for run in ("r3", "r4", "r5"):
        gate = make_fifo(home.path.parent / f"{run}.fifo")
        proc = ok(
            "spawn", "-t", "cat {gate}", "-v", f"gate={gate}", "--as", run, "--group", "g", "--json"
        )
        queued[run] = json.loads(proc.stdout)
        gates[run] = gate
    assert [queued[r]["status"] for r in ("r3", "r4", "r5")] == ["queued"] * 3
    for run in ("r3", "r4", "r5"):  # a forecast: how many are ahead depends on timing
        assert queued[run]["waiting_for"].startswith("a slot of group g")
    for run in ("r3", "r4", "r5"):
        wait_status(home, run, "queued")
    wait_for_change(home.groups, lambda: len(group_view("g")["queued"]) == 3, 30)
    listed = {r["run"]: r["status"] for r in actors.runs()}
    assert [listed[r] for r in ("r1", "r2", "r3", "r4", "r5")] == ["running"] * 2 + ["queued"] * 3
    view = group_view("g")
    assert sorted(view["running"]) == ["r1", "r2"] and view["queued"] == ["r3", "r4", "r5"]
    assert actors.status("r4")["waiting_for"] == "a slot of group g (1 ahead)"
    assert named(home, "r3", "command.start") == []  # nothing of a queued run has run

    release(gates["r2"])
    wait_status(home, "r3", "running")
    assert status("r4") == "queued" and status("r5") == "queued"
    for run in ("r1", "r3", "r4", "r5"):
        wait_status(home, run, "running")
        release(gates[run])
    for run in gates:
        assert done(run)["status"] == "done"

    starts = {run: named(home, run, "command.start")[0]["ts"] for run in gates}
    ends = {run: named(home, run, "command.done")[0]["ts"] for run in gates}
    assert sorted(("r3", "r4", "r5"), key=starts.__getitem__) == ["r3", "r4", "r5"]
    for run in gates:  # at no start were two others running
        running = [o for o in gates if o != run and starts[o] <= starts[run] < ends[o]]
        assert len(running) <= 1, (run, running)
    (dequeued,) = named(home, "r3", "run.dequeued")
    assert dequeued["group"] == "g" and dequeued["waited_ms"] > 0
    assert group_view("g") == {"group": "g", "parallel": 2, "running": [], "queued": []}


def test_a_sigkilled_member_runner_frees_its_slot_and_the_queue_goes_on(
    home: StateRoot,
) -> None:
    ok("group", "set", "solo", "--parallel", "1")
    blocked(home, "holder", "--group", "solo")
    wait_status(home, "holder", "running")
    ok("spawn", "-t", "echo next", "--as", "next", "--group", "solo")
    wait_status(home, "next", "queued")
    os.kill(int(actors.status("holder")["pid"]), signal.SIGKILL)
    assert done("next")["status"] == "done"
    assert status("holder") == "exited"


def test_a_sigkilled_queued_run_ends_alone_and_the_one_behind_it_keeps_its_turn(
    home: StateRoot,
) -> None:
    ok("group", "set", "solo", "--parallel", "1")
    gate = blocked(home, "first", "--group", "solo")
    wait_status(home, "first", "running")
    for run in ("second", "third"):
        ok("spawn", "-t", f"echo {run}", "--as", run, "--group", "solo")
        wait_status(home, run, "queued")
    second = int(actors.status("second")["pid"])
    os.kill(second, signal.SIGKILL)
    wait_status(home, "second", "exited")
    assert group_view("solo")["queued"] == ["third"]  # the dead entry is gone
    assert status("third") == "queued"
    release(gate)
    assert done("third")["status"] == "done"
    assert named(home, "second", "command.start") == []


def test_cancel_and_kill_reach_a_queued_run_which_never_starts(home: StateRoot) -> None:
    ok("group", "set", "solo", "--parallel", "1")
    gate = blocked(home, "busy", "--group", "solo")
    wait_status(home, "busy", "running")
    for run in ("c", "k", "after-them"):
        ok("spawn", "-t", f"echo {run}", "--as", run, "--group", "solo")
        wait_status(home, run, "queued")
    assert ok("cancel", "c", "--session", SESSION).returncode == 0
    assert ok("kill", "k", "--session", SESSION).returncode == 0
    assert status("c") == "cancelled" and status("k") == "killed"
    release(gate)
    assert done("after-them")["status"] == "done"
    for run in ("c", "k"):
        assert named(home, run, "command.start") == []


@pytest.mark.skipif(platform.portable(), reason="a portable exit watch keeps the runner up")
def test_a_queued_run_parks_and_still_starts_when_its_turn_comes(home: StateRoot) -> None:
    ok("group", "set", "solo", "--parallel", "1")
    gate = blocked(home, "busy", "--group", "solo")
    wait_status(home, "busy", "running")
    ok("spawn", "-t", "echo parked", "--as", "parked", "--group", "solo")
    wait_status(home, "parked", "queued")
    pid = int(actors.status("parked")["pid"])
    wait_for_change(home.run("parked").dir, lambda: runner_parked(pid), 30, what="parked")
    release(gate)
    assert done("parked")["status"] == "done"


def test_raising_the_limit_starts_the_queue_at_once(home: StateRoot) -> None:
    ok("group", "set", "grow", "--parallel", "1")
    gate = blocked(home, "one", "--group", "grow")
    wait_status(home, "one", "running")
    ok("spawn", "-t", "echo two", "--as", "two", "--group", "grow")
    wait_status(home, "two", "queued")
    ok("group", "set", "grow", "--parallel", "2")
    assert done("two")["status"] == "done"
    release(gate)
    done("one")


# -- --after ----------------------------------------------------------------------------


def test_after_a_done_run_starts_then_and_after_a_failed_one_ends_skipped(
    home: StateRoot,
) -> None:
    gate = blocked(home, "dep")
    wait_status(home, "dep", "running")
    ok("spawn", "-t", "echo after", "--as", "waits", "--after", "dep")
    wait_status(home, "waits", "queued")
    assert actors.status("waits")["waiting_for"] == "run dep"
    release(gate)
    assert done("waits")["status"] == "done"
    assert named(home, "waits", "command.start")[0]["ts"] >= named(home, "dep", "run.done")[0]["ts"]

    ok("spawn", "-t", "false", "--as", "bad")
    ok("spawn", "-t", "echo never", "--as", "skip", "--after", "bad")
    summary = done("skip")
    assert summary["status"] == "skipped"
    assert summary["reason"] == "skipped: run bad ended failed"
    assert named(home, "skip", "command.start") == []
    assert cli("wait", "skip").returncode == 1
    followups = [e for e in inbox(home) if e["body"]["run"] == "skip"]
    assert [e["type"] for e in followups] == ["run.skipped"]
    assert "skipped: run bad ended failed" in followups[0]["summary"]


def test_after_a_cancelled_dependency_is_skipped_too(home: StateRoot) -> None:
    blocked(home, "dep")
    wait_status(home, "dep", "running")
    ok("spawn", "-t", "echo x", "--as", "later", "--after", "dep")
    wait_status(home, "later", "queued")
    ok("cancel", "dep", "--session", SESSION)
    summary = done("later")
    assert (summary["status"], summary["reason"]) == ("skipped", "skipped: run dep ended cancelled")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--after", "ghost"), "no run ghost"),
        (("--group", "nogroup"), "no group nogroup"),
        (("--group", "../up"), "group name"),
    ],
)
def test_a_bad_group_or_dependency_is_refused_and_changes_nothing(
    home: StateRoot, args: tuple[str, ...], says: str
) -> None:
    ok("group", "set", "real", "--parallel", "1")
    before = sorted(p.name for p in home.path.rglob("*"))
    proc = cli("spawn", "-t", "echo x", "--as", "nope", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in home.path.rglob("*")) == before


@pytest.mark.parametrize("parallel", ["0", "-1", "1025", "x"])
def test_a_bad_limit_is_refused(home: StateRoot, parallel: str) -> None:
    proc = cli("group", "set", "g", "--parallel", parallel)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert not home.groups.exists()


def test_a_group_with_members_is_not_removed_unless_forced(home: StateRoot) -> None:
    ok("group", "set", "busy", "--parallel", "1")
    gate = blocked(home, "member", "--group", "busy")
    wait_status(home, "member", "running")
    ok("spawn", "-t", "echo x", "--as", "waiting", "--group", "busy")
    wait_status(home, "waiting", "queued")
    refused = cli("group", "rm", "busy")
    assert refused.returncode == 2 and "1 running and 1 queued" in refused.stderr
    ok("group", "rm", "busy", "--force")
    summary = done("waiting")
    assert (summary["status"], summary["reason"]) == ("skipped", "skipped: group busy was removed")
    release(gate)
    assert done("member")["status"] == "done"
    assert json.loads(ok("group", "ls", "--json").stdout) == []


# -- restart ----------------------------------------------------------------------------


def test_restart_starts_a_finished_run_again_with_its_recipe_values_and_group(
    home: StateRoot, tmp_path: Path
) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    script = "import sys; print(sys.argv[1]); sys.exit(int(sys.argv[2]))"
    recipe = write_recipe(
        recipes,
        "say",
        {
            "args": ["py:string", "word:string", "code:int"],
            "template": f"{{py}} -c '{script}' {{word}} {{code}}",
        },
    )
    ok("group", "set", "g", "--parallel", "3")
    given = ["-v", f"py={sys.executable}", "-v", "word=hello there", "-v", "code=3"]
    ok("spawn", str(recipe), *given, "--as", "say", "--group", "g")
    assert done("say")["status"] == "failed"
    running = blocked(home, "still")
    wait_status(home, "still", "running")
    refused = cli("restart", "still", "--session", SESSION)
    assert refused.returncode == 2 and "only a finished run can be restarted" in refused.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "actors", "restart", "say", "--session", SESSION],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "run:say-2"
    again = done("say-2")
    assert again["status"] == "failed" and again["code"] == 3
    old = json.loads(home.run("say").run_json.read_text())
    new = json.loads(home.run("say-2").run_json.read_text())
    assert new["values"]["word"] == "hello there" and new["values"]["code"] == 3
    assert (new["cwd"], new["group"], new["restart_of"]) == (old["cwd"], "g", "say")
    assert (home.run("say-2").stdout).read_text() == "hello there\n"
    assert ok("restart", "say-2").stdout.strip() == "run:say-3"  # counts on from the first
    assert json.loads(home.run("say-3").run_json.read_text())["restart_of"] == "say"
    done("say-3")
    release(running)
    done("still")


def test_restart_of_another_sessions_run_is_refused(home: StateRoot) -> None:
    ok("spawn", "-t", "true", "--as", "theirs")
    done("theirs")
    proc = cli("restart", "theirs", "--session", "someone-else")
    assert proc.returncode == 2 and "refusing to restart" in proc.stderr
    assert not home.run("theirs-2").dir.exists()


# -- actors group run ------------------------------------------------------------------


def _group_run(name: str, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actors", "group", "run", name, "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_group_run_takes_turns_and_exits_with_the_commands_status(home: StateRoot) -> None:
    ok("group", "set", "agents", "--parallel", "1")
    gate = make_fifo(home.path.parent / "agent.fifo")
    first = _group_run("agents", "cat", str(gate))
    wait_for_change(home.groups, lambda: group_view("agents")["running"] != [], 30)
    second = _group_run("agents", sys.executable, "-c", "import sys; print('second'); sys.exit(3)")
    wait_for_change(home.groups, lambda: len(group_view("agents")["queued"]) == 1, 30)
    assert second.poll() is None  # it waits its turn
    release(gate)
    assert first.communicate(timeout=60)[0] == "go\n" and first.returncode == 0
    assert second.communicate(timeout=60)[0] == "second\n" and second.returncode == 3


def test_group_run_gets_the_slot_of_a_sigkilled_holder(home: StateRoot) -> None:
    ok("group", "set", "agents", "--parallel", "1")
    holder = _group_run("agents", "sleep", "300")
    wait_for_change(home.groups, lambda: group_view("agents")["running"] != [], 30)
    waiter = _group_run("agents", "true")
    wait_for_change(home.groups, lambda: len(group_view("agents")["queued"]) == 1, 30)
    os.killpg(holder.pid, signal.SIGKILL)  # it and its `sleep`
    holder.communicate(timeout=60)
    waiter.communicate(timeout=60)
    assert waiter.returncode == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("unset", "--", "true"), "no group unset"),
        (("agents", "--", "no-such-command-xyz"), "cannot start 'no-such-command-xyz'"),
    ],
)
def test_group_run_refuses_what_cannot_work(
    home: StateRoot, args: tuple[str, ...], says: str
) -> None:
    ok("group", "set", "agents", "--parallel", "1")
    proc = cli("group", "run", *args)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert group_view("agents") == {"group": "agents", "parallel": 1, "running": [], "queued": []}

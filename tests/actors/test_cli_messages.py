"""message / recv / emit / inspect through the real CLI, with real runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import cli, make_fifo, read_fifo_line, snapshot, wait_for_change, write_recipe


def _spawn(*args: str) -> str:
    proc = cli("spawn", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().removeprefix("run:")


def test_player_recipe_end_to_end(home: StateRoot) -> None:
    run_id = _spawn("player", "--as", "run:music", "-v", "tracks=3")
    for kind in ("player.next", "player.pause", "player.resume", "player.next", "player.stop"):
        proc = cli("message", "run:music", kind)
        assert proc.returncode == 0, proc.stderr
        assert "state=queued" in proc.stdout
    assert actors.wait(run_id, timeout=60)["status"] == "done"
    view = json.loads(cli("inspect", "run:music", "--view", "messages", "--json").stdout)
    player = [m for m in view["messages"] if m["type"].startswith("player.")]
    summaries = [m["summary"] for m in player]
    assert summaries == [
        "playing: track 1 of 3",
        "playing: track 2 of 3",
        "paused: track 2 of 3",
        "playing: track 2 of 3",
        "playing: track 3 of 3",
        "stopped at track 3",
    ]
    assert all(m["from"] == "run:music" and m["to"] == "coordinator" for m in player)
    assert [m["type"] for m in view["messages"]][-1] == "command.done"  # the diagnostic leaf record
    mailbox = json.loads(cli("inspect", "run:music", "--view", "mailbox", "--json").stdout)
    assert [e["state"] for e in mailbox["entries"]] == ["handled"] * 5


BAD_MESSAGES = {
    "malformed address": (["run/music", "player.next"], "missing the KIND: prefix"),
    "dotdot branch": (["branch:music/..", "x.y"], "invalid address 'branch:music/..'"),
    "unknown run": (["run:ghost", "player.next"], "no run ghost"),
    "bad json body": (["run:music", "player.next", "{oops", "--body-json"], "body is not valid JSON"),
    "oversized body": (["run:music", "player.next", "x" * 70000], "the limit is 65536"),
    "undeclared type": (["run:music", "player.rewind"], "does not accept 'player.rewind'"),
    "bad type": (["run:music", "no spaces allowed"], "invalid message type"),
    "emit outside a run": (["coordinator", "note"], "only a process inside a run"),
}


@pytest.mark.parametrize("case", sorted(BAD_MESSAGES))
def test_bad_messages_exit_2_and_append_nothing(home: StateRoot, tmp_path: Path, case: str) -> None:
    _spawn("player", "--as", "run:music")
    outbox = home.run("music").outbox
    # the player announces its first track on start: let that land before looking
    wait_for_change(outbox.parent, lambda: read_jsonl(outbox).records, what="first track")
    before = snapshot(home.path)
    args, expected = BAD_MESSAGES[case]
    proc = cli("message", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert proc.stderr.startswith("actors: ") and proc.stderr.count("\n") == 1
    after = snapshot(home.path)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    # only the runner's own doorbell/progress bookkeeping may move while we looked
    assert not {c for c in changed if c.endswith(("inbox.jsonl", "wake.jsonl", "outbox.jsonl"))}


def test_control_stop_and_kill_are_applied_by_the_runner(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    first = _spawn("-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}")
    assert read_fifo_line(fifo) == "ready"
    assert cli("message", f"run:{first}", "control.stop").returncode == 0
    final = actors.wait(first, timeout=30)
    assert final["status"] == "cancelled" and final["reason"] == "control.stop"
    fifo2 = make_fifo(tmp_path / "ready2.fifo")
    second = _spawn("-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo2}")
    assert read_fifo_line(fifo2) == "ready"
    assert cli("message", f"run:{second}", "control.kill").returncode == 0
    final = actors.wait(second, timeout=30)
    assert final["status"] == "killed" and final["code"] == 137
    refused = cli("message", f"run:{second}", "player.next")
    assert refused.returncode == 2


def test_control_archive_applies_to_finished_runs_only(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    busy = _spawn("-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}")
    assert read_fifo_line(fifo) == "ready"
    refused = cli("message", f"run:{busy}", "control.archive")
    assert refused.returncode == 2 and "applies to finished runs only" in refused.stderr
    done = _spawn("hello")
    actors.wait(done, timeout=30)
    archived = cli("message", f"run:{done}", "control.archive")
    assert archived.returncode == 0 and "state=handled" in archived.stdout
    assert (home.archive / done).is_dir()


FIFO_READER = """
import sys
with open(sys.argv[1]) as fifo, open(sys.argv[2], "w") as out:
    out.write(fifo.readline())
"""


def test_fifo_fast_path_and_mailbox_only_path_both_deliver(home: StateRoot, tmp_path: Path) -> None:
    reader = tmp_path / "reader.py"
    reader.write_text(FIFO_READER)
    got = tmp_path / "got.json"
    fast = write_recipe(
        tmp_path,
        "fast",
        {
            "mailbox": {"accepts": ["job.go"], "endpoint": "fifo"},
            "template": f"{sys.executable} {{script}} {{state_dir}}/control.fifo {{out}}",
        },
    )
    run_fast = _spawn(str(fast), "-v", f"script={reader}", "-v", f"out={got}")
    # The reader attaches when its process opens the FIFO; until then the message queues.
    outcome = {}
    for _ in range(500):
        outcome = actors.message(f"run:{run_fast}", "job.go", {"n": 1})
        if outcome["state"] == "sent":
            break
        actors.wait(run_fast, timeout=0.02)
    assert outcome["state"] == "sent"
    assert actors.wait(run_fast, timeout=30)["status"] == "done"
    assert json.loads(got.read_text())["body"] == {"n": 1}
    slow = write_recipe(
        tmp_path, "slow", {"mailbox": {"accepts": ["job.go"]}, "template": "actors recv --json"}
    )
    run_slow = _spawn(str(slow))
    assert actors.message(f"run:{run_slow}", "job.go", {"n": 2})["state"] == "queued"
    assert actors.wait(run_slow, timeout=30)["status"] == "done"
    assert json.loads(actors.result(run_slow)["output"])["body"] == {"n": 2}


WORKER = "sh -c 'ACTORS_BRANCH=front actors recv --json; actors emit task.result done --to room'"


def test_branch_messages_reach_the_branch_worker_and_rooms_collect_posts(home: StateRoot) -> None:
    run_id = _spawn("-t", WORKER)
    proc = cli(
        "message", f"branch:{run_id}/front", "task.assign", '{"slice": "T-1"}', "--body-json", "--force"
    )
    assert proc.returncode == 0, proc.stderr
    assert actors.wait(run_id, timeout=30)["status"] == "done"
    assert json.loads(actors.result(run_id)["output"])["body"] == {"slice": "T-1"}
    routed = read_jsonl(home.run(run_id).inbox).records
    assert routed[0]["state"] == "routed"
    room = json.loads(cli("inspect", f"room:{run_id}", "--view", "messages", "--json").stdout)
    assert [(m["type"], m["from"]) for m in room["messages"]] == [("task.result", f"run:{run_id}")]
    posted = cli("message", f"room:{run_id}", "note.human", "hello room")
    assert posted.returncode == 0 and "state=posted" in posted.stdout
    status = json.loads(cli("inspect", f"room:{run_id}", "--json").stdout)
    assert status["messages"] == 2 and status["last_type"] == "note.human"


def test_tool_address_spawns_the_recipe_with_the_body_as_values(home: StateRoot) -> None:
    proc = cli("message", "tool:hello", "tool.invoke", '{"name": "tool"}', "--body-json", "--json")
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["state"] == "spawned"
    actors.wait(outcome["run"], timeout=30)
    assert actors.result(outcome["run"])["output"] == "HELLO TOOL\n"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"nmae": "ada"}', "actors: tool hello has no parameter nmae; did you mean name?"),
        ('"ada"', "actors: tool hello has no parameter input; its parameters: name"),
        ('{"run_id": "x"}', "actors: run_id: run_id is set by the runtime and cannot be given"),
    ],
)
def test_tool_address_refuses_a_body_its_parameters_do_not_take(
    home: StateRoot, body: str, error: str
) -> None:
    before = snapshot(home.path)
    proc = cli("message", "tool:hello", "tool.invoke", body, "--body-json")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(error), proc.stderr
    assert snapshot(home.path) == before


def test_session_inventory_filters_by_status(home: StateRoot) -> None:
    first = actors.spawn("hello", session="coord-1")
    actors.spawn("hello", session="coord-2")
    actors.wait(first["run"], timeout=30)
    view = json.loads(cli("inspect", "session:coord-1", "--view", "runs", "--json").stdout)
    assert [r["run"] for r in view["runs"]] == [first["run"]]
    bad = cli("inspect", "session:coord-1", "--status", "sleepy")
    assert bad.returncode == 2 and "unknown status filter" in bad.stderr


def test_a_hostile_branch_variable_cannot_reach_another_runs_inbox(
    home: StateRoot, tmp_path: Path
) -> None:
    victim = _spawn("player", "--as", "run:victim")
    assert cli("message", "run:victim", "player.pause").returncode == 0
    out = tmp_path / "attempt.txt"
    attacker = actors.spawn(
        template='sh -c \'ACTORS_BRANCH=../../victim actors recv --timeout 1 > "$1" 2>&1; echo $? >> "$1"\' x {o}',
        values={"o": str(out)},
    )
    actors.wait(attacker["run"], timeout=30)
    text = out.read_text()
    assert "invalid ACTORS_BRANCH" in text and text.strip().endswith("2")
    states = [e["state"] for e in actors.inspect("run:victim", "mailbox")["entries"]]
    assert "claimed" not in states[:1] or states == ["handled"]
    actors.kill(victim)


def test_control_types_go_to_runs_not_branches(home: StateRoot) -> None:
    run_id = _spawn("player")
    proc = cli("message", f"branch:{run_id}/front", "control.stop", "--force")
    assert proc.returncode == 2 and "goes to the run, not a branch" in proc.stderr
    actors.kill(run_id)


def test_rooms_of_another_sessions_run_are_refused(home: StateRoot) -> None:
    run_id = actors.spawn("player", session="owner-a")["run"]
    proc = cli("message", f"room:{run_id}", "note.x", "hi", env={"ACTORS_SESSION": "owner-b"})
    assert proc.returncode == 2 and "belongs to owner-a" in proc.stderr
    actors.kill(run_id, session="owner-a")

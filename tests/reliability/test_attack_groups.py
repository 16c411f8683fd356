"""Attacks on a group's files (issue 28, capacity): who holds a slot or waits is what
the kernel's flocks say, never what a file says, and nothing under `groups/` is followed
through a link. A planted record never blocks the queue, misdirects a watch or makes a
run start past the limit; a damaged group refuses with one line; a run that finds its
group damaged ends `skipped` naming why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import actors
from runtime.core.process import capture
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, make_fifo, wait_for_change


def ok(*args: str) -> str:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def status(run: str) -> str:
    return str(actors.status(run)["status"])


def done(run: str) -> dict:
    return finished({"run": run, "pid": actors.status(run)["pid"]})


def refused(proc, says: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2


def holder(home: StateRoot, run: str, group: str) -> Path:
    gate = make_fifo(home.path.parent / f"{run}.fifo")
    ok("spawn", "-t", "cat {g}", "-v", f"g={gate}", "--as", run, "--group", group)
    wait_for_change(home.run(run).dir, lambda: status(run) == "running", 30)
    return gate


def release(gate: Path) -> None:
    fd = os.open(gate, os.O_WRONLY)
    os.write(fd, b"x\n")
    os.close(fd)


def test_a_forged_queue_entry_ahead_of_everyone_blocks_nothing(home: StateRoot) -> None:
    ok("group", "set", "g", "--parallel", "1")
    gate = holder(home, "busy", "g")
    queue = home.group("g").queue
    forged = {"label": "init", "pid": 1, "identity": capture(1), "queued_at": "2000"}
    (queue / "00000000000000000000000000.1.json").write_text(json.dumps(forged))
    ok("spawn", "-t", "echo next", "--as", "next", "--group", "g")
    wait_for_change(home.run("next").dir, lambda: status("next") == "queued", 30)
    release(gate)
    assert done("next")["status"] == "done"
    assert not (queue / "00000000000000000000000000.1.json").exists()  # swept as dead


def test_forged_holders_for_every_slot_do_not_queue_a_run(home: StateRoot) -> None:
    ok("group", "set", "g", "--parallel", "2")
    for index in range(2):
        record = {"label": "ghost", "pid": 1, "identity": capture(1), "since": "2000"}
        home.group("g").holder(index).write_text(json.dumps(record))
    out = json.loads(ok("spawn", "-t", "echo hi", "--as", "free", "--group", "g", "--json"))
    assert out["status"] == "starting"
    assert done("free")["status"] == "done"
    assert json.loads(ok("group", "ls", "--json"))[0]["running"] == []


def test_a_forged_holder_record_does_not_misdirect_the_heads_watch(home: StateRoot) -> None:
    ok("group", "set", "g", "--parallel", "1")
    holder(home, "busy", "g")
    ok("spawn", "-t", "echo next", "--as", "next", "--group", "g")
    wait_for_change(home.run("next").dir, lambda: status("next") == "queued", 30)
    forged = {"label": "init", "pid": 1, "identity": capture(1), "since": "2000"}
    home.group("g").holder(0).write_text(json.dumps(forged))  # names pid 1 as the holder
    ok("kill", "busy")  # SIGKILL: no ring, only its exit can wake the head
    assert done("next")["status"] == "done"


@pytest.mark.parametrize("where", ["group", "queue", "slot"])
def test_a_link_planted_in_a_group_is_never_followed(
    home: StateRoot, tmp_path: Path, where: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine")
    before = sorted(p.name for p in outside.rglob("*"))
    if where == "group":
        home.groups.mkdir(parents=True, mode=0o700)
        (home.groups / "g").symlink_to(outside)
        refused(cli("group", "set", "g", "--parallel", "1"), "g")
        refused(cli("spawn", "-t", "echo x", "--group", "g"), "g")
    else:
        ok("group", "set", "g", "--parallel", "1")
        paths = home.group("g")
        if where == "queue":
            os.rmdir(paths.queue)
            paths.queue.symlink_to(outside)
        else:
            paths.slot(0).symlink_to(outside / "keep")
        ok("spawn", "-t", "echo x", "--as", "victim", "--group", "g")
        summary = done("victim")
        assert summary["status"] == "skipped", summary
        assert summary["reason"].startswith("skipped: group g: "), summary
    assert sorted(p.name for p in outside.rglob("*")) == before
    assert (outside / "keep").read_text() == "mine"


@pytest.mark.parametrize(
    "content",
    [
        b'{"parallel": "many"}',
        b'{"parallel": 1e400}',
        b'{"parallel": true}',
        b"[" * 100_000,
        b"\x00\xff not json",
    ],
    ids=["string", "huge-float", "bool", "deep", "binary"],
)
def test_a_damaged_group_json_refuses_with_one_line(home: StateRoot, content: bytes) -> None:
    ok("group", "set", "g", "--parallel", "1")
    home.group("g").record.write_bytes(content)
    refused(cli("spawn", "-t", "echo x", "--as", "x", "--group", "g"), "group g")
    assert not home.run("x").dir.exists()
    (listed,) = json.loads(ok("group", "ls", "--json"))
    assert listed["group"] == "g" and "damaged" in listed
    assert "(damaged:" in ok("group", "ls")


def test_a_fifo_planted_as_a_queue_entry_hangs_nothing(home: StateRoot) -> None:
    ok("group", "set", "g", "--parallel", "1")
    gate = holder(home, "busy", "g")
    make_fifo(home.group("g").queue / "00000000000000000000000000.2.json")
    ok("spawn", "-t", "echo next", "--as", "next", "--group", "g")
    wait_for_change(home.run("next").dir, lambda: status("next") == "queued", 30)
    assert json.loads(ok("group", "ls", "--json"))[0]["queued"] == ["next"]
    release(gate)
    assert done("next")["status"] == "done"


def test_control_characters_in_a_group_run_label_never_reach_the_terminal(
    home: StateRoot, tmp_path: Path
) -> None:
    ok("group", "set", "g", "--parallel", "1")
    evil = tmp_path / "evil\x1b[2Jname"
    evil.write_text("#!/bin/sh\nexec sleep 300\n")
    evil.chmod(0o700)
    import subprocess
    import sys

    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", "group", "run", "g", "--", evil.name],
        start_new_session=True,
        env=env,
    )
    try:
        wait_for_change(
            home.groups, lambda: json.loads(ok("group", "ls", "--json"))[0]["running"], 30
        )
        shown = ok("group", "ls")
        assert "\x1b" not in shown and "\\x1b" in shown
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()

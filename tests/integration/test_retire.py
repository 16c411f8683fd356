"""`retire_when: children_terminal`: a supervisor is retired once, when its last child ends."""

from __future__ import annotations

import sys
from pathlib import Path

import actors
from runtime.core.ids import parse_iso
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from runtime.views.index import list_runs
from tests.conftest import cli, finished, make_fifo, read_fifo_line, write_recipe


def test_supervisor_retires_once_when_its_last_child_ends(home: StateRoot, tmp_path: Path) -> None:
    ready = make_fifo(tmp_path / "ready")
    first, last = make_fifo(tmp_path / "first"), make_fifo(tmp_path / "last")
    spawn = f"{sys.executable} -m actors spawn --json"
    script = (
        f"{spawn} -t 'head -n1 {first}' --as run:child-first >/dev/null && "
        f"{spawn} -t 'head -n1 {last}' --as run:child-last >/dev/null && "
        f"echo spawned > {ready}; exec sleep 300"
    )
    path = write_recipe(
        tmp_path, "supervisor", {"retire_when": "children_terminal", "template": "sh -c {script}"}
    )
    record = actors.spawn(str(path), values={"script": script}, as_="run:sup")
    assert read_fifo_line(ready) == "spawned"
    with open(first, "w") as release:
        release.write("go\n")
    assert actors.wait("child-first", timeout=60)["status"] == "done"
    assert actors.status("sup")["status"] == "running"  # one child still runs
    tree = cli("ls", "--tree").stdout.splitlines()
    # aligned columns, children newest first (as `ls`)
    assert tree[0].split()[:2] == ["sup", "running"], tree
    assert tree[1].split()[:3] == ["├─", "child-last", "running"], tree
    assert tree[2].split()[:3] == ["└─", "child-first", "done"], tree
    children = actors.inspect("run:sup")["children"]
    assert [(c["run"], c["status"]) for c in children] == [
        ("child-last", "running"),
        ("child-first", "done"),
    ]
    assert cli("status", "--line").stdout.strip() in ("▶", "▶▷", "▷▶")  # sup (+ its leaf)
    with open(last, "w") as release:
        release.write("go\n")
    gated = actors.wait("child-last", timeout=60)
    summary = finished(record)
    assert summary["status"] == "done"
    result = actors.result("sup")
    assert result["retired"] is True and "every child run is terminal" in result["reason"]
    retires = [
        e for e in read_jsonl(home.run("sup").events).records if e.get("event") == "run.retire"
    ]
    assert len(retires) == 1
    assert sorted(retires[0]["children"]) == ["child-first", "child-last"]
    assert parse_iso(retires[0]["ts"]) >= parse_iso(actors.result("child-last")["ended_at"])
    assert gated["status"] == "done"
    assert cli("status", "--line").stdout == ""  # nothing active: an empty prompt segment
    children = {r["run"]: r["parent"] for r in list_runs(home) if r.get("parent")}
    assert children == {"child-first": "run:sup", "child-last": "run:sup"}


def test_a_child_stopped_on_purpose_still_retires_its_supervisor(
    home: StateRoot, tmp_path: Path
) -> None:
    """A child stopped with `actors kill` is owed no follow-up, so nothing lands in the
    supervisor's inbox; its end must still ring the supervisor's `run` doorbell (there is
    no periodic re-check any more), and the supervisor retires."""
    ready = make_fifo(tmp_path / "ready")
    spawn = f"{sys.executable} -m actors spawn --json"
    script = (
        f"{spawn} -t 'sleep 300' --as run:child-only >/dev/null && "
        f"echo spawned > {ready}; exec sleep 300"
    )
    path = write_recipe(
        tmp_path, "supervisor", {"retire_when": "children_terminal", "template": "sh -c {script}"}
    )
    record = actors.spawn(str(path), values={"script": script}, as_="run:sup")
    assert read_fifo_line(ready) == "spawned"
    actors.kill("child-only", force=True)
    assert actors.wait("child-only", timeout=60)["status"] in ("cancelled", "killed")
    assert not home.run("sup").inbox.exists() or not [
        r for r in read_jsonl(home.run("sup").inbox).records if r.get("envelope")
    ]  # no follow-up reached the supervisor: only the doorbell did
    assert finished(record, timeout=30)["status"] == "done"
    assert actors.result("sup")["retired"] is True

"""Many idle runs at once, each woken by a message, with no inotify instance used."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

import pytest

import actors
from runtime.core.process import session_members
from runtime.store.layout import StateRoot
from tests.conftest import make_fifo, write_recipe


def _inotify_fds(pid: int) -> int:
    count = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                    count += 1
            except OSError:
                continue
    except OSError:
        return 0
    return count


def _idle_runs_each_woken(home: StateRoot, tmp_path: Path, count: int) -> None:
    barrier = make_fifo(tmp_path / "ready.fifo")
    recipe = write_recipe(
        tmp_path,
        "idle",
        {
            "mailbox": {"accepts": ["wake.up"]},
            "template": "sh -c 'echo ready > \"$1\"; exec actors recv --timeout 300' idle {barrier}",
        },
    )
    reader = os.open(barrier, os.O_RDONLY | os.O_NONBLOCK)
    keeper = os.open(barrier, os.O_WRONLY)  # no hang-up (and no busy select) between writers
    try:
        runs = [
            actors.spawn(str(recipe), values={"barrier": str(barrier)})["run"] for _ in range(count)
        ]
        ready, buffer, deadline = 0, b"", time.monotonic() + 600
        while ready < count:
            assert time.monotonic() < deadline, f"only {ready} of {count} runs became ready"
            if select.select([reader], [], [], 5)[0]:
                try:
                    buffer += os.read(reader, 65536)
                except BlockingIOError:
                    continue
                ready = buffer.count(b"ready\n")
    finally:
        os.close(keeper)
        os.close(reader)
    pids = []
    for run_id in runs:
        identity = actors.status(run_id)
        pids.extend(session_members(int(identity["pid"])))
    assert sum(_inotify_fds(pid) for pid in pids) == 0
    for index, run_id in enumerate(runs):
        actors.message(f"run:{run_id}", "wake.up", f"hello {index}")
    for index, run_id in enumerate(runs):
        assert actors.wait(run_id, timeout=120)["status"] == "done"
        assert actors.result(run_id)["output"] == f"wake.up hello {index}\n"


def test_twenty_idle_runs_are_each_woken_by_a_message(home: StateRoot, tmp_path: Path) -> None:
    _idle_runs_each_woken(home, tmp_path, 20)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_hundred_idle_runs_are_each_woken_by_a_message(home: StateRoot, tmp_path: Path) -> None:
    _idle_runs_each_woken(home, tmp_path, int(os.environ.get("ACTORS_SCALE_RUNS", "200")))

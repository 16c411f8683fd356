"""bench_scale starts hundreds of runs: Ctrl-C in the middle must leave none behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for_change


def _processes_of(root: str) -> list[int]:
    """Live processes whose environment names `root` as their state root."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()
            if stat[0] in (b"Z", b"X"):
                continue
            if f"ACTORS_HOME={root}".encode() in Path(f"/proc/{name}/environ").read_bytes():
                found.append(int(name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_scale_bench_kills_every_run_it_started(signum: int) -> None:
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_scale", "--runs", "40", "--consumers", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert bench.stdout is not None
    root = ""
    for line in bench.stdout:  # the baselines come first, then the state root
        if line.startswith("state root: "):
            root = line.split()[2]
            break
    assert root, "the bench never said where its runs live"
    runs = Path(root) / "runs"

    def five_spawned() -> bool:
        assert bench.poll() is None, "the bench ended before it was interrupted"
        return runs.is_dir() and len(list(runs.glob("*/run.json"))) >= 5

    # the root itself may not exist yet when named; its temporary parent does
    wait_for_change(Path(root).parent, five_spawned, timeout=120, what="five runs spawned")
    assert _processes_of(root)  # runs are live: the interrupt lands mid-spawn
    bench.send_signal(signum)
    out, err = bench.communicate(timeout=60)
    assert bench.returncode != 0
    assert "cleanup: 0 processes of these runs left" in out, (out, err[-2000:])
    assert _processes_of(root) == []

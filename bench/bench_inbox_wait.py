"""A follow-up lands in a session inbox -> `actors inbox wait` (another process) printed.

Each sample starts one waiter, waits until it sleeps in select() (armed), then appends
one follow-up to the session inbox the way the delivery runner does (`SessionInbox.append`:
fsynced line, then the doorbell rung) and reads the waiter's line from its stdout.

Rows, comparable with the message-wake goal (median <= 1 ms, p99 <= 5 ms, sender's fsync
included):
- append (durable + ring) -> line read: the whole latency an agent sees;
- ring -> line read: what the waiter itself adds (FIFO wake, one inbox read, one print);
the baseline is the same append with nobody waiting, in the same process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, row


def _wait_asleep(pid: int) -> None:
    """Until the waiter sleeps in select() (armed, inbox checked): a sample taken while it
    is still starting would time its start-up competing for the 2 cores, not its wake."""
    while True:
        with open(f"/proc/{pid}/wchan") as wchan:
            where = wchan.read()
        if "poll" in where or "select" in where:
            return
        time.sleep(0.001)


def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        from runtime.delivery.sessions import SessionInbox
        from runtime.store.layout import StateRoot, session_paths

        root = StateRoot.from_env()
        alone = SessionInbox(session_paths(root, "bench-base"))
        paths = session_paths(root, "bench")
        inbox = SessionInbox(paths)
        baseline, total, after_ring = [], [], []
        for i in range(10 if quick else 40):
            envelope = {"type": "run.done", "from": "run:b", "summary": f"bench {i}"}
            started = time.perf_counter()
            alone.append(f"base-{i}", envelope, "immediate")
            baseline.append((time.perf_counter() - started) * 1000)
            waiter = subprocess.Popen(
                [sys.executable, "-m", "actors", "inbox", "wait", "--session", "bench"],
                stdout=subprocess.PIPE,
                text=True,
            )
            _wait_asleep(waiter.pid)
            started = time.perf_counter()
            inbox.append(f"wait-{i}", envelope, "immediate")
            rung = time.perf_counter()
            assert waiter.stdout is not None
            line = waiter.stdout.readline()
            done = time.perf_counter()
            total.append((done - started) * 1000)
            after_ring.append((done - rung) * 1000)
            waiter.wait()
            assert line.startswith("ACTORS: 1 unread"), line
            inbox.drain()
        emit(row("follow-up append -> inbox wait printed", total, baseline))
        emit(row("  of which ring -> inbox wait printed", after_ring))


if __name__ == "__main__":
    main("--quick" in sys.argv)

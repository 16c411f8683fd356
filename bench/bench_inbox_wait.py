"""Follow-up durable -> `actors inbox wait` (a separate process) has printed its line.

Each sample starts one waiter, waits until its doorbell FIFO exists (armed), then times
`DeliveryRunner.submit` of a follow-up to a `file` session until the waiter's line is read
from its stdout. The baseline is the submit alone (durable append + rings), in the same
process; the difference is the waiter's wake, its inbox read and its print.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, row


def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        from adapters.delivery import DeliveryRunner
        from runtime.paths import StateRoot
        from runtime.sessions import SessionInbox, session_paths

        root = StateRoot.from_env()
        runner = DeliveryRunner(root)
        doorbells = session_paths(root, "bench").doorbells
        baseline, samples = [], []
        for i in range(10 if quick else 40):
            envelope = {"type": "run.done", "from": "run:b", "summary": f"bench {i}"}
            started = time.perf_counter()
            runner.submit("bench-base", envelope, delivery_id=f"base-{i}")
            baseline.append((time.perf_counter() - started) * 1000)
            waiter = subprocess.Popen(
                [sys.executable, "-m", "actors", "inbox", "wait", "--session", "bench"],
                stdout=subprocess.PIPE,
                text=True,
            )
            while not (doorbells.is_dir() and any(doorbells.glob("*.fifo"))):
                time.sleep(0.001)
            started = time.perf_counter()
            runner.submit("bench", envelope, delivery_id=f"wait-{i}")
            assert waiter.stdout is not None
            line = waiter.stdout.readline()
            samples.append((time.perf_counter() - started) * 1000)
            waiter.wait()
            assert line.startswith("ACTORS: 1 unread"), line
            SessionInbox(session_paths(root, "bench")).drain()
        emit(row("follow-up durable -> inbox wait printed", samples, baseline))


if __name__ == "__main__":
    main("--quick" in sys.argv)

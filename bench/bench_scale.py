"""Many idle runs at once: memory, and message wake latency for each of them.

Each run's leaf is a real consumer (`actors.recv()` in a Python script) that records when
it held its message. Memory is the proportional set size (PSS: shared pages split
fairly) of every runner and consumer process, summed; RSS is shown for comparison.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._stats import emit, row

CONSUMER = """
import json, sys, time
import actors
envelope = actors.recv(ack=False)
held = time.time()
actors.ack(envelope["id"])
open(sys.argv[1], "w").write(json.dumps({"held": held, "body": envelope["envelope"]["body"]}))
"""

Runs = list[tuple[dict[str, Any], Path]]


def _mem_kb(pid: int, field: str) -> int:
    try:
        path = "smaps_rollup" if field == "Pss" else "status"
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _armed(state_dir: str) -> bool:
    try:
        return len(os.listdir(Path(state_dir) / "doorbells")) >= 2  # runner + consumer
    except FileNotFoundError:
        return False


def _measure(work: Path, runs: Runs, count: int) -> None:
    import actors
    from runtime.core.process import session_members

    recipe = work / "idle.json"
    for i in range(count):
        out = work / f"held-{i}.json"
        record = actors.spawn(
            str(recipe), values={"script": str(work / "consumer.py"), "out": str(out)}
        )
        runs.append((record, out))
    deadline = time.monotonic() + 600
    while sum(_armed(rec["state_dir"]) for rec, _ in runs) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    pids = [p for rec, _ in runs for p in session_members(int(rec["pid"]))]
    pss = sum(_mem_kb(p, "Pss") for p in pids) / 1024
    rss = sum(_mem_kb(p, "VmRSS") for p in pids) / 1024
    emit(
        f"{f'{count} idle runs (runner + consumer each)':<44} PSS {pss:7.0f} MB  RSS {rss:7.0f} MB  "
        f"({pss / count:.1f} MB PSS per run)"
    )
    sent = []
    for rec, _ in runs:
        time.sleep(0.005)
        sent.append(time.time())
        actors.message(f"run:{rec['run']}", "wake.up", rec["run"])
    latency = []
    for (rec, out), t0 in zip(runs, sent, strict=True):
        actors.wait(rec["run"], timeout=120)
        latency.append((json.loads(out.read_text())["held"] - t0) * 1000)
    emit(row(f"message -> held, each of {count} idle runs", latency))


def main(quick: bool) -> None:
    count = 20 if quick else 200
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        import actors

        work = Path(tmp)
        (work / "consumer.py").write_text(CONSUMER)
        (work / "idle.json").write_text(
            json.dumps(
                {
                    "mailbox": {"accepts": ["wake.up"]},
                    "template": f"{sys.executable} {{script}} {{out}}",
                }
            )
        )
        runs: Runs = []
        try:
            _measure(work, runs, count)
        finally:  # never leave hundreds of idle runners behind, even after a failure
            for rec, _ in runs:
                try:
                    actors.kill(str(rec["run"]))
                except actors.ActorsError:
                    pass


if __name__ == "__main__":
    main("--quick" in sys.argv)

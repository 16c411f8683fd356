"""`actors kill` of a 20-grandchild tree, `actors ls` at scale, inbox append throughput.

Baselines in the same run: `killpg` of an equal shell tree from Python (the kernel floor
plus our polling), `python -c pass` for CLI start-up, and raw single-writer fsync appends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, row

TREE = "sh -c 'for i in $(seq 20); do sleep 300 & done; echo ready > \"$1\"; wait' tree {f}"


def _kill_bench(n: int) -> None:
    import actors
    from runtime.core.process import is_gone, session_members

    samples, floor = [], []
    for i in range(n):
        fifo = Path(tempfile.mkdtemp()) / "ready"
        os.mkfifo(fifo)
        record = actors.spawn(template=TREE, values={"f": str(fifo)})
        with open(fifo) as handle:
            handle.readline()
        members = list(session_members(int(record["pid"])))
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "actors", "kill", record["run"]],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        while not all(is_gone(p) for p in members):
            time.sleep(0.0005)
        samples.append((time.perf_counter() - t0) * 1000)
        shutil.rmtree(fifo.parent)
        # floor: the same tree started directly, killed with killpg
        proc = subprocess.Popen(
            ["sh", "-c", "for i in $(seq 20); do sleep 300 & done; wait"], start_new_session=True
        )
        time.sleep(0.05)
        tree = list(session_members(proc.pid))
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        while not all(is_gone(p) for p in tree):
            time.sleep(0.0005)
        floor.append((time.perf_counter() - t0) * 1000)
        del i
    emit(row("actors kill (CLI) until 21 processes gone", samples, floor))
    emit(row("killpg floor (same tree, no CLI)", floor))


def _ls_bench(total: int, running: int) -> None:
    import actors
    from runtime.store.layout import StateRoot

    root = StateRoot.from_env()
    template = actors.spawn(template="true")
    actors.wait(template["run"], timeout=60)
    time.sleep(0.3)
    src = root.run(template["run"]).dir
    for i in range(total - running):
        dst = root.runs / f"synthetic-{i:05d}"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("doorbells"))
        run = json.loads((dst / "run.json").read_text())
        run["run"] = dst.name
        (dst / "run.json").write_text(json.dumps(run))
    live = [actors.spawn(template="sleep 600")["run"] for _ in range(running)]
    subprocess.run([sys.executable, "-m", "actors", "ls"], check=True, stdout=subprocess.DEVNULL)
    samples = []
    for _ in range(10):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "actors", "ls", "--json"], check=True, capture_output=True
        ).stdout
        samples.append((time.perf_counter() - t0) * 1000)
    listed = len(json.loads(out))
    assert listed == len(os.listdir(root.runs)), (listed, len(os.listdir(root.runs)))
    emit(row(f"actors ls over {listed} runs ({running} running)", samples))
    for run_id in live:
        actors.kill(run_id)


SENDER = """
import sys, time
import actors
run, count, fsync, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[5]
start, batch = float(sys.argv[4]), int(sys.argv[6])
sender = None if mode == "call" else actors.sender(run, fsync=fsync)
while time.time() < start:
    time.sleep(0.001)
if mode == "batch":
    with sender:
        for first in range(0, count, batch):
            sender.send_many("bench.item", range(first, min(count, first + batch)))
elif sender is not None:
    with sender:
        for i in range(count):
            sender.send("bench.item", i)
else:
    for i in range(count):
        actors.message(run, "bench.item", i, fsync=fsync)
"""
BATCH = 100
MODES = {"call": ("senders", 1), "stream": ("streams", 4), "batch": (f"streams x{BATCH}", 25)}


def _throughput(per_sender: int) -> None:
    """8 sender processes into one inbox: `actors.message` per call (validates the run and
    writes a wake line each time), `actors.sender` streams (validated once), and streams
    that hand over `BATCH` messages per `send_many` (one flock, fsync and ring each)."""
    import actors

    sink = Path(tempfile.mkdtemp()) / "sink.json"
    sink.write_text(json.dumps({"mailbox": {"accepts": ["bench.item"]}, "template": "sleep 600"}))
    for mode, (label, scale) in MODES.items():
        for fsync in (True, False):
            count = per_sender * scale
            record = actors.spawn(str(sink))
            start = time.time() + 1.5
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        SENDER,
                        f"run:{record['run']}",
                        str(count),
                        "1" if fsync else "0",
                        str(start),
                        mode,
                        str(BATCH),
                    ]
                )
                for _ in range(8)
            ]
            for p in procs:
                p.wait()
            elapsed = time.time() - start
            rate = 8 * count / elapsed
            name = f"inbox appends, 8 {label}, fsync={fsync}"
            emit(f"{name:<44} {rate:9.0f} envelopes/s  ({8 * count} in {elapsed:.2f} s)")
            actors.kill(record["run"])
    from runtime.store.appends import append_jsonl

    raw = Path(tempfile.mkdtemp()) / "raw.jsonl"
    t0 = time.perf_counter()
    for i in range(2000):
        append_jsonl(raw, {"i": i, "pad": "x" * 250}, fsync=True)
    emit(
        f"{'baseline: 1 writer, raw fsync append':<44} {2000 / (time.perf_counter() - t0):9.0f} lines/s"
    )


def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        _kill_bench(8 if quick else 30)
        _throughput(250 if quick else 1000)
        _ls_bench(1000 if quick else 10_000, 10 if quick else 100)


if __name__ == "__main__":
    main("--quick" in sys.argv)

"""Message -> consumer wake latency, CLI message cost, and idle consumer CPU.

The consumer is a real run whose script loops on `actors.recv()` and records, for every
message, the wall-clock time at which it held it. Baseline: a consumer that polls the
inbox with `os.stat` every 500 ms (what the upstream research measured), same messages,
same run of the benchmark.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, idle_cpu, row

CONSUMER = """
import json, sys, time
import actors
out = open(sys.argv[1], "a", buffering=1)
while True:
    entry = actors.recv(ack=False)
    held = time.time()
    actors.ack(entry["id"])
    envelope = entry["envelope"]
    if envelope["type"] == "bench.end":
        break
    out.write(json.dumps({"id": envelope["body"], "held": held}) + "\\n")
"""

POLLER = """
import json, os, sys, time
inbox, out = sys.argv[1], open(sys.argv[2], "a", buffering=1)
size = 0
while True:
    time.sleep(0.5)
    try:
        now = os.stat(inbox).st_size
    except FileNotFoundError:
        continue
    if now != size:
        held = time.time()
        with open(inbox, "rb") as f:
            f.seek(size)
            for line in f.read(now - size).splitlines():
                body = json.loads(line).get("envelope", {}).get("body")
                if body == "end":
                    sys.exit(0)
                out.write(json.dumps({"id": body, "held": held}) + "\\n")
        size = now
"""


def _read_held(path: Path, count: int, timeout: float = 60) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return {str(json.loads(x)["id"]): float(json.loads(x)["held"]) for x in lines}
        time.sleep(0.01)
    raise TimeoutError(f"consumer held only {len(lines)} of {count}")


def _fsync_floor(work: Path, count: int = 200) -> list[float]:
    """What durability alone costs on this disk: every message is fsynced before its
    doorbell rings, so the wake latency can never be below this."""
    samples = []
    fd = os.open(work / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, b"x" * 299 + b"\n")
            os.fsync(fd)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
    return samples


def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        import actors

        work = Path(tmp)
        (work / "consumer.py").write_text(CONSUMER)
        (work / "poller.py").write_text(POLLER)
        (work / "sink.json").write_text(
            json.dumps(
                {
                    "mailbox": {"accepts": ["bench.msg", "bench.end"]},
                    "template": f"{sys.executable} {{script}} {{out}}",
                }
            )
        )
        held_file = work / "held.jsonl"
        record = actors.spawn(
            str(work / "sink.json"),
            values={"script": str(work / "consumer.py"), "out": str(held_file)},
        )
        run = f"run:{record['run']}"
        time.sleep(1.0)  # let the consumer arm its doorbell and go idle

        n = 100 if quick else 1000
        sent: dict[str, float] = {}
        for i in range(n):
            time.sleep(random.uniform(0.002, 0.01))
            t0 = time.time()
            actors.message(run, "bench.msg", str(i))
            sent[str(i)] = t0
        held = _read_held(held_file, n)
        api = [(held[k] - sent[k]) * 1000 for k in sent]

        cli_n = 20 if quick else 100
        cli_wall, cli_after = [], []
        for i in range(n, n + cli_n):
            t0 = time.time()
            subprocess.run(
                [sys.executable, "-m", "actors", "message", run, "bench.msg", str(i)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            t1 = time.time()
            cli_wall.append((t1 - t0) * 1000)
            got = _read_held(held_file, i + 1)
            # from the call: the consumer often holds it before the CLI has exited
            cli_after.append((got[str(i)] - t0) * 1000)
        pass_times = []
        for _ in range(cli_n):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            pass_times.append((time.perf_counter() - t0) * 1000)

        consumer_pid = int(actors.status(record["run"])["pid"])
        from runtime.core.process import session_members

        members = list(session_members(consumer_pid))
        idle = idle_cpu(members, 3.0 if quick else 30.0)
        actors.message(run, "bench.end")
        actors.wait(record["run"], timeout=30)

        # Baseline: a 500 ms stat poll on a plain inbox file, the same kind of append.
        poll_inbox = work / "poll-inbox.jsonl"
        poll_out = work / "poll-held.jsonl"
        poller = subprocess.Popen(
            [sys.executable, str(work / "poller.py"), str(poll_inbox), str(poll_out)]
        )
        from runtime.store.appends import append_jsonl

        time.sleep(0.6)
        poll_n = 12 if quick else 60
        poll_sent = {}
        for i in range(poll_n):
            time.sleep(random.uniform(0.52, 0.7))
            poll_sent[str(i)] = time.time()
            append_jsonl(poll_inbox, {"envelope": {"body": str(i)}}, fsync=True)
        poll_held = _read_held(poll_out, poll_n)
        append_jsonl(poll_inbox, {"envelope": {"body": "end"}})
        poller.wait(timeout=10)
        baseline = [(poll_held[k] - poll_sent[k]) * 1000 for k in poll_sent]

        emit(row("message -> consumer holds it (Python API)", api, baseline))
        emit(row("500 ms stat poll baseline", baseline))
        emit(row("  floor: one 300-byte append + fsync", _fsync_floor(work)))
        emit(row("actors message (CLI) wall", cli_wall, pass_times))
        emit(row("CLI message called -> consumer holds it", cli_after))
        emit(f"{'idle consumer (runner + recv script) CPU':<44} {idle}")


if __name__ == "__main__":
    main("--quick" in sys.argv)

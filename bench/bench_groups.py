"""Capacity: how soon a queued run starts once its group's slot frees.

Measured: a run queued in a group of one, behind a holder whose one command blocks on a
FIFO, its runner parked; the bench writes the FIFO (the holder's command ends), and the
sample is the time to the queued run's `command.start`. That span holds the holder's
wake from its own park, its whole end (result.json, follow-up, the sweep of its
processes, the slot given back) and the queued runner's wake from its park; the second
row starts at the holder's `run.done` (its end journaled), the hand-over alone. The same for `actors group run` waiting behind a
holder: FIFO written -> its command started.

Baseline, same process: a plain run's start, `actors.spawn` called -> its
`command.start` (what any run costs to start, with no queue).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench._stats import emit, row

DEADLINE_S = 60.0


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _event_at(events: Path, name: str) -> float:
    """When `name` was journaled (polled: the runner is a process we share only files with)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for line in events.read_text().splitlines() if events.exists() else []:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == name:
                return _epoch(event["ts"])
        time.sleep(0.002)
    raise TimeoutError(f"no {name} in {events}")


def _parked(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while b"ACTORS_RUNNER_STATE=wait " not in Path(f"/proc/{pid}/environ").read_bytes():
        if time.monotonic() > deadline:
            raise TimeoutError(f"runner {pid} did not park")
        time.sleep(0.01)


def _release(fifo: Path) -> float:
    started = time.time()
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, b"go\n")
    os.close(fd)
    return started


def _plain(root: Path, index: int) -> float:
    import actors

    started = time.time()
    record = actors.spawn(template="true", as_=f"plain{index}")
    began = _event_at(root / "runs" / record["run"] / "events.jsonl", "command.start")
    actors.wait(record["run"], timeout=DEADLINE_S)
    return (began - started) * 1000


def _queued_run(root: Path, index: int) -> tuple[float, float]:
    import actors

    fifo = root.parent / f"hold{index}.fifo"
    os.mkfifo(fifo, 0o600)
    actors.spawn(template="cat {f}", values={"f": str(fifo)}, as_=f"hold{index}", group="one")
    _event_at(root / "runs" / f"hold{index}" / "events.jsonl", "command.start")
    queued = actors.spawn(template="true", as_=f"queued{index}", group="one")
    _event_at(root / "runs" / f"queued{index}" / "events.jsonl", "run.queued")
    _parked(int(queued["pid"]))
    released = _release(fifo)
    began = _event_at(root / "runs" / f"queued{index}" / "events.jsonl", "command.start")
    ended = _event_at(root / "runs" / f"hold{index}" / "events.jsonl", "run.done")
    actors.wait(f"queued{index}", timeout=DEADLINE_S)
    return (began - released) * 1000, (began - ended) * 1000


def _group_run(root: Path, index: int) -> float:
    import actors

    fifo = root.parent / f"gate{index}.fifo"
    os.mkfifo(fifo, 0o600)
    stamp = root.parent / f"stamp{index}"
    actors.spawn(template="cat {f}", values={"f": str(fifo)}, as_=f"gate{index}", group="one")
    _event_at(root / "runs" / f"gate{index}" / "events.jsonl", "command.start")
    code = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors",
            "group",
            "run",
            "one",
            "--",
            sys.executable,
            "-c",
            code,
            str(stamp),
        ]
    )
    queue = root / "groups" / "one" / "queue"
    deadline = time.monotonic() + DEADLINE_S
    while not any(queue.iterdir()):
        if time.monotonic() > deadline:
            raise TimeoutError("group run did not queue")
        time.sleep(0.005)
    released = _release(fifo)
    waiter.wait(DEADLINE_S)
    # the child's own interpreter start-up is in this span: subtract nothing, say so
    return (float(stamp.read_text()) - released) * 1000


def main(quick: bool) -> None:
    n = 8 if quick else 30
    with tempfile.TemporaryDirectory() as base:
        root = Path(base) / "state"
        os.environ["ACTORS_HOME"] = str(root)
        import actors  # noqa: F401  (the API reads ACTORS_HOME per call)
        from runtime.runner.slots import set_limit
        from runtime.store.layout import StateRoot

        set_limit(StateRoot(root), "one", 1)
        _plain(root, -1)  # warm the compile cache
        plain = [_plain(root, i) for i in range(n)]
        queued = [_queued_run(root, i) for i in range(n)]
        group_run = [_group_run(root, i) for i in range(max(5, n // 3))]
        emit(row("plain run: spawn -> command.start", plain))
        emit(
            row("queued run: holder's command ends -> command.start", [q[0] for q in queued], plain)
        )
        emit(row("queued run: holder's run.done -> command.start", [q[1] for q in queued], plain))
        emit(row("group run: holder ends -> its command running", group_run, plain))


if __name__ == "__main__":
    main("--quick" in sys.argv)

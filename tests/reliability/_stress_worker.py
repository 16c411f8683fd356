"""One of the 16 processes of tests/reliability/test_concurrency.py.

`python _stress_worker.py ROLE INDEX WORKDIR SECONDS RUN...`: waits on the start barrier
(writes `ready` to WORKDIR/ready, then reads one byte from WORKDIR/go), then does its role
against the given runs until SECONDS have passed, recording what it did in WORKDIR:
- sender: `message` job.item to a random run; `sent-<i>.jsonl` gets {id, run, seq} after
  each send returned;
- receiver: `recv` (through a run's capability token) from a random run;
  `recv-<i>.jsonl` gets {id, run, sender, seq};
- emitter: `emit` (log or notify) from a random run; `emit-<i>.jsonl` gets {id, run, delivery};
- inspector: status / inspect (status, messages, mailbox) / ls / session inspect;
- archiver: `archive` of a live run (must be refused, and the run must stay), and a short
  run spawned, waited for and archived; `archived-<i>.jsonl` gets {run}.
Prints one JSON line of counts at the end; any unexpected exception exits non-zero.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any


def _as_run(run_id: str, home: Path) -> None:
    """Act through `run_id`'s capability token (as its own scripts do)."""
    os.environ["ACTORS_RUN_ID"] = run_id
    from tests.conftest import run_token

    os.environ["ACTORS_RUN_TOKEN"] = run_token(home / "runs" / run_id)


def main() -> int:
    role, index, workdir, seconds, runs = (
        sys.argv[1],
        int(sys.argv[2]),
        Path(sys.argv[3]),
        float(sys.argv[4]),
        sys.argv[5:],
    )
    import actors
    from runtime.core.errors import Conflict, NotFound
    from runtime.runs.retention import archive_run
    from runtime.store.layout import StateRoot

    root = StateRoot.from_env()
    rng = random.Random(index)
    ready = os.open(workdir / "ready", os.O_WRONLY)  # FIFOs the test holds open
    os.write(ready, f"{role} {index}\n".encode())
    os.close(ready)
    go = os.open(workdir / "go", os.O_RDONLY)
    try:
        assert os.read(go, 1) == b"g"
    finally:
        os.close(go)
    deadline = time.monotonic() + seconds
    counts: dict[str, Any] = {"role": role, "index": index, "ops": 0}
    log = open(workdir / f"{role}-{index}.jsonl", "a")  # noqa: SIM115
    seq = 0
    while time.monotonic() < deadline:
        run = rng.choice(runs)
        if role == "sender":
            outcome = actors.message(f"run:{run}", "job.item", {"s": index, "seq": seq})
            log.write(json.dumps({"id": outcome["id"], "run": run, "seq": seq}) + "\n")
            seq += 1
        elif role == "receiver":
            _as_run(run, root.path)
            envelope = actors.recv(("job.item",), timeout=0.05)
            if envelope is not None:
                body = envelope["body"]
                log.write(
                    json.dumps(
                        {"id": envelope["id"], "run": run, "sender": body["s"], "seq": body["seq"]}
                    )
                    + "\n"
                )
        elif role == "emitter":
            _as_run(run, root.path)
            delivery = rng.choice(["log", "log", "notify"])
            outcome = actors.emit("note.stress", {"e": index, "seq": seq}, delivery=delivery)
            log.write(json.dumps({"id": outcome["id"], "run": run, "delivery": delivery}) + "\n")
            seq += 1
        elif role == "inspector":
            view = rng.choice(["status", "messages", "mailbox"])
            assert actors.inspect(f"run:{run}", view, lines=20)["target"] == f"run:{run}"
            assert actors.status(run)["status"] == "running"
            listed = {r["run"]: r["status"] for r in actors.runs()}
            assert listed[run] == "running"
            actors.inspect("session:stress", "runs")
        elif role == "archiver":
            try:
                archive_run(root, run)
            except Conflict:
                pass
            else:
                raise AssertionError(f"archived the live run {run}")
            assert (root.runs / run / "run.json").exists()
            short = actors.spawn(template="true", session="stress")
            assert actors.wait(short["run"], timeout=60)["status"] == "done"
            archive_run(root, short["run"])
            try:
                actors.message(f"run:{short['run']}", "job.item", session="stress")
            except NotFound:
                pass
            else:
                raise AssertionError("a message reached an archived run")
            log.write(json.dumps({"run": short["run"]}) + "\n")
        else:
            raise SystemExit(f"unknown role {role}")
        log.flush()
        counts["ops"] += 1
    log.close()
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

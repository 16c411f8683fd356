"""Concurrency: 16 processes message / recv / emit / inspect / archive against 4 runs.

Each of the 4 runs consumes its own inbox with `actors recv` in a loop; 4 more receivers
compete with them for the same inboxes through the runs' capability tokens. 6 senders
message random runs, 2 emitters emit (some delivered to the session as notifications),
2 inspectors read status / inspect / ls the whole time, and 2 archivers try to archive the
live runs (always refused) and spawn, wait for and archive short runs of their own. All 16
line up on a FIFO barrier and run for a bounded time (a few seconds here; minutes in the
`slow` soak, `ACTORS_SOAK_S`). Afterwards: every sent envelope was handled exactly once,
every journal parses, each sender's messages were queued and claimed in its order, every
emitted message is in its outbox (and, when delivered, in the session inbox) exactly once.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import fold, read_jsonl
from tests.conftest import finished, write_recipe
from tests.reliability._checks import journals_parse
from tests.reliability._report import record

SUITE = "concurrency"
WORKER = Path(__file__).with_name("_stress_worker.py")
ROLES = ["sender"] * 6 + ["receiver"] * 4 + ["emitter"] * 2 + ["inspector"] * 2 + ["archiver"] * 2

CONSUMER = """
import json, os, sys
import actors
run = os.environ["ACTORS_RUN_ID"]
with open(sys.argv[1], "a") as out:
    while True:
        envelope = actors.recv(timeout=300)
        if envelope is None:
            sys.exit(3)
        if envelope["type"] == "test.end":
            break
        body = envelope["body"]
        line = {"id": envelope["id"], "run": run, "sender": body["s"], "seq": body["seq"]}
        out.write(json.dumps(line) + "\\n")
        out.flush()
"""


def _read_lines(fd: int, count: int, timeout: float) -> list[str]:
    buffer = b""
    deadline = time.monotonic() + timeout
    while buffer.count(b"\n") < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(buffer.splitlines())} of {count} workers got ready"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            buffer += os.read(fd, 65536)
    return buffer.decode().splitlines()


def _records(workdir: Path, role: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(workdir.glob(f"{role}-*.jsonl")):
        chunk = read_jsonl(path)
        assert chunk.bad_lines == 0 and not chunk.torn_tail, path
        worker = int(path.stem.split("-")[1])
        out.extend({**r, "worker": worker} for r in chunk.records)
    return out


def _stress(home: StateRoot, tmp_path: Path, seconds: float) -> dict[str, Any]:
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    recipe = write_recipe(
        tmp_path,
        "sink",
        {
            "mailbox": {"accepts": ["job.item", "test.end"]},
            "template": f"{sys.executable} {script} {{out}}",
        },
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    runs = [
        actors.spawn(
            str(recipe), values={"out": str(workdir / f"consumer-{n}.jsonl")}, session="stress"
        )
        for n in range(4)
    ]
    run_ids = [r["run"] for r in runs]
    os.mkfifo(workdir / "ready", 0o600)
    os.mkfifo(workdir / "go", 0o600)
    # held read-write: workers' opens never block and nobody ever sees end-of-file
    ready_fd = os.open(workdir / "ready", os.O_RDWR | os.O_NONBLOCK)
    go_fd = os.open(workdir / "go", os.O_RDWR)
    env = dict(os.environ, ACTORS_SESSION="stress")
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), role, str(i), str(workdir), str(seconds), *run_ids],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, role in enumerate(ROLES)
    ]
    try:
        assert len(_read_lines(ready_fd, len(procs), timeout=120)) == len(procs)
        started = time.monotonic()
        os.write(go_fd, b"g" * len(procs))
        outputs = [p.communicate(timeout=seconds + 120) for p in procs]
        elapsed = time.monotonic() - started
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        os.close(ready_fd)
        os.close(go_fd)
    failures = [
        f"{r}: {err}" for r, (_, err), p in zip(ROLES, outputs, procs, strict=True) if p.returncode
    ]
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
    counts = [json.loads(out.splitlines()[-1]) for out, _ in outputs]
    for run_id in run_ids:
        actors.message(f"run:{run_id}", "test.end", session="stress")
    for run in runs:
        assert finished(run, timeout=300)["status"] == "done"
    return {"runs": run_ids, "workdir": workdir, "counts": counts, "elapsed": elapsed}


def _check(home: StateRoot, outcome: dict[str, Any]) -> dict[str, Any]:
    workdir: Path = outcome["workdir"]
    # every sent envelope handled exactly once, by exactly one consumer
    sent = {r["id"]: r for r in _records(workdir, "sender")}
    assert len(sent) == len(_records(workdir, "sender")) and sent
    by_receivers = _records(workdir, "receiver")
    by_consumers = _records(workdir, "consumer")
    handled = Counter(r["id"] for r in by_receivers + by_consumers)
    assert set(handled) == set(sent), (len(set(sent) - set(handled)), len(set(handled) - set(sent)))
    assert max(handled.values()) == 1, [i for i, n in handled.items() if n > 1][:5]
    # the journals agree, and each sender's messages were queued and claimed in its order.
    # A long run passes the journal cap: a compaction folds each entry it keeps into one
    # line (in arrival order) and drops settled ones, which its marker counts.
    compactions = 0
    for run_id in outcome["runs"]:
        chunk = read_jsonl(home.run(run_id).inbox)
        records, marker = chunk.records, chunk.compaction or {}
        compactions += int(marker.get("generation", 0))
        mine = {i for i, r in sent.items() if r["run"] == run_id}
        folded = fold(records)
        kept = mine & set(folded)
        assert all(folded[i]["state"] == "handled" for i in kept)
        assert len(mine - kept) <= marker.get("dropped_total", 0)
        entry_lines = Counter(r["id"] for r in records if "envelope" in r)
        handled_lines = Counter(r["id"] for r in records if r.get("state") == "handled")
        assert all(entry_lines[i] == 1 and handled_lines[i] == 1 for i in kept)
        queued: dict[int, list[int]] = defaultdict(list)
        claimed: dict[int, list[int]] = defaultdict(list)
        seen_claim: set[str] = set()
        for r in records:
            if r["id"] not in mine:
                continue
            sender, seq = sent[r["id"]]["worker"], sent[r["id"]]["seq"]
            if "envelope" in r:
                queued[sender].append(seq)
            elif r["state"] == "claimed" and r["id"] not in seen_claim:
                seen_claim.add(r["id"])
                claimed[sender].append(seq)
        for sequence in (*queued.values(), *claimed.values()):
            assert sequence == sorted(sequence)
    # every emitted message is in its run's outbox once (or counted by its marker);
    # notifications in the session once
    emitted = _records(workdir, "emitter")
    for run_id in outcome["runs"]:
        chunk = read_jsonl(home.run(run_id).outbox)
        outbox = Counter(r.get("id") for r in chunk.records)
        to_run = [e for e in emitted if e["run"] == run_id]
        assert all(outbox[e["id"]] <= 1 for e in to_run)
        missing = sum(1 for e in to_run if not outbox[e["id"]])
        assert missing <= (chunk.compaction or {}).get("dropped_total", 0)
    inbox = SessionInbox(session_paths(home, "stress")).entries()
    by_envelope = Counter(e["envelope"]["id"] for e in inbox)
    notified = [e for e in emitted if e["delivery"] == "notify"]
    assert all(by_envelope[e["id"]] == 1 for e in notified)
    # short runs archived whole, each with its one terminal follow-up
    archived = _records(workdir, "archiver")
    followups = Counter(
        e["envelope"]["body"]["run"] for e in inbox if e["envelope"].get("type") == "run.done"
    )
    for entry in archived:
        assert (home.archive / entry["run"] / "result.json").exists()
        assert not (home.runs / entry["run"]).exists()
        assert followups[entry["run"]] == 1, entry["run"]
    journals = journals_parse(home.path)
    ops = Counter()
    for count in outcome["counts"]:
        ops[count["role"]] += count["ops"]
    return {
        "sent": len(sent),
        "by_rivals": len(by_receivers),
        "emitted": len(emitted),
        "notified": len(notified),
        "archived": len(archived),
        "inspections": ops["inspector"],
        "journals": journals,
        "compactions": compactions,
    }


def _run_suite(home: StateRoot, tmp_path: Path, seconds: float, label: str) -> None:
    outcome = _stress(home, tmp_path, seconds)
    seen = _check(home, outcome)
    record(
        SUITE,
        f"16 processes (6 message, 4 rival recv, 2 emit, 2 inspect, 2 archive) against 4 "
        f"consuming runs for {outcome['elapsed']:.0f} s ({label})",
        seen["sent"],
        f"{seen['sent']} envelopes each handled exactly once ({seen['by_rivals']} by rival "
        f"receivers), per-sender queue and claim order held; {seen['emitted']} emitted, "
        f"{seen['notified']} notifications delivered once; {seen['archived']} short runs "
        f"archived with one follow-up each, every archive of a live run refused; "
        f"{seen['inspections']} inspections; {seen['journals']} journals parse; "
        f"{seen['compactions']} inbox compactions",
    )


def test_sixteen_processes_for_a_few_seconds(home: StateRoot, tmp_path: Path) -> None:
    _run_suite(home, tmp_path, float(os.environ.get("ACTORS_STRESS_S", "4")), "normal tier")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sixteen_processes_soak(home: StateRoot, tmp_path: Path) -> None:
    _run_suite(home, tmp_path, float(os.environ.get("ACTORS_SOAK_S", "180")), "slow soak")

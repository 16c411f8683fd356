"""Journal bounds: a run that receives a flood of messages keeps every journal within
its documented cap, with the compaction marker, handles each message exactly once, and
still answers inspect from a small file.

The run's consumer acknowledges each message and logs every 20th to its outbox; most
messages arrive through a streaming sender (the throughput path), some through
`actors.message` (which also writes a wake.jsonl line each). The normal tier sends 10,000
with a 64 KiB cap; the `slow` tier 100,000 with the shipped 4 MiB cap.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import actors
from runtime.store.journals import CAP_BYTES
from runtime.store.layout import StateRoot
from runtime.store.reads import fold, read_jsonl
from tests.conftest import finished, write_recipe
from tests.reliability._report import record

SUITE = "journal bounds"

CONSUMER = """
import sys
import actors
with open(sys.argv[1], "a") as out:
    handled = 0
    while True:
        envelope = actors.recv(timeout=600)
        if envelope is None:
            sys.exit(3)
        if envelope["type"] == "test.end":
            break
        out.write(envelope["id"] + "\\n")
        handled += 1
        if handled % 20 == 0:
            actors.emit("job.progress", {"handled": handled})
"""

SENDER = """
import sys
import actors
run, count, direct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = []
with actors.sender(run, fsync=False) as stream:
    for n in range(count - direct):
        ids.append(stream.send("job.go", {"n": n}))
for n in range(direct):
    ids.append(actors.message(run, "job.go", {"direct": n})["id"])
open(sys.argv[4], "w").write("\\n".join(ids) + "\\n")
"""


def _bound(path: Path, cap: int) -> tuple[int, int]:
    """The journal's size and its documented bound: the cap, and for an inbox also one
    and a half times what it could not drop at its last compaction (unread entries)."""
    chunk = read_jsonl(path)
    marker = chunk.compaction or {}
    return path.stat().st_size, cap + (3 * int(marker.get("open_bytes", 0))) // 2


def _flood(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, cap: int
) -> None:
    monkeypatch.setenv("ACTORS_JOURNAL_CAP_BYTES", str(cap))  # the runner and its children
    consumer = tmp_path / "consumer.py"
    consumer.write_text(CONSUMER)
    handled_file = tmp_path / "handled.txt"
    recipe = write_recipe(
        tmp_path,
        "flooded",
        {
            "mailbox": {"accepts": ["job.go", "test.end"], "emits": ["job.progress"]},
            "template": f"{sys.executable} {consumer} {handled_file}",
        },
    )
    run = actors.spawn(str(recipe))
    run_id = str(run["run"])
    sent_file = tmp_path / "sent.txt"
    direct = max(count // 50, 500)
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", SENDER, f"run:{run_id}", str(count), str(direct), str(sent_file)],
        check=True,
        timeout=1200,
    )
    actors.message(f"run:{run_id}", "test.end")
    assert finished(run, timeout=1200)["status"] == "done"
    elapsed = time.monotonic() - started

    sent = sent_file.read_text().split()
    handled = handled_file.read_text().split()
    assert len(sent) == count and sorted(handled) == sorted(sent)  # each exactly once

    paths = home.run(run_id)
    journals = {
        "inbox": paths.inbox,
        "wake": paths.wake,
        "outbox": paths.outbox,
        "events": paths.events,
    }
    sizes = {}
    for name, path in journals.items():
        chunk = read_jsonl(path)
        assert chunk.bad_lines == 0 and not chunk.torn_tail, name
        size, bound = _bound(path, cap)
        assert size <= bound, (name, size, bound)
        sizes[name] = size
    inbox = read_jsonl(paths.inbox)
    assert inbox.compaction is not None and inbox.compaction["journal"] == "state"
    # what the inbox no longer lists, the marker counts: nothing vanished unaccounted
    listed = [e for e in fold(inbox.records).values() if "envelope" in e]
    assert len(listed) + inbox.compaction["dropped_total"] == count + 1
    assert {r["state"] for r in listed} == {"handled"}
    # one wake line per `message` call (the stream rings doorbells only), kept or counted
    wake = read_jsonl(paths.wake)
    assert len(wake.records) + (wake.compaction or {}).get("dropped_total", 0) == direct + 1
    if direct * 150 > cap:  # the lines are about 180 bytes: this log passed its cap
        assert wake.compaction is not None
    outbox = read_jsonl(paths.outbox)
    progress = [m for m in outbox.records if m.get("type") == "job.progress"]
    assert len(progress) + (outbox.compaction or {}).get("dropped_total", 0) >= count // 20
    if count // 20 * 250 > cap:  # progress lines are about 290 bytes
        assert outbox.compaction is not None
    # inspect reads the compacted journal, not the history
    before = time.monotonic()
    view = actors.inspect(f"run:{run_id}", "mailbox", lines=20)
    inspect_ms = (time.monotonic() - before) * 1000
    assert len(view["entries"]) == 20
    record(
        SUITE,
        f"{count:,} messages into one consuming run ({direct} via `message`, the rest "
        f"streamed), journal cap {cap // 1024} KiB",
        count,
        f"each handled exactly once in {elapsed:.0f} s; inbox compacted "
        f"{inbox.compaction['generation']} times ({inbox.compaction['dropped_total']:,} "
        f"settled entries dropped, counted by the marker); final sizes "
        + ", ".join(f"{k} {v // 1024} KiB" for k, v in sizes.items())
        + f"; inspect of the mailbox {inspect_ms:.0f} ms",
    )


def test_ten_thousand_messages_keep_journals_within_a_small_cap(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _flood(home, tmp_path, monkeypatch, 10_000, 64 * 1024)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_hundred_thousand_messages_keep_journals_within_the_shipped_cap(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _flood(home, tmp_path, monkeypatch, 100_000, CAP_BYTES)


def test_the_cap_is_read_from_the_environment() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from runtime.store.journals import CAP_BYTES; print(CAP_BYTES)"],
        env={**os.environ, "ACTORS_JOURNAL_CAP_BYTES": "12345"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "12345"

"""Journal caps: logs keep their newest lines, inboxes keep every open entry, and no
append is lost to a compaction running at the same time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runtime.messaging.mailbox import Mailbox
from runtime.store.appends import append_jsonl
from runtime.store.journals import LogCompactor, StateCompactor
from runtime.store.reads import read_jsonl


def _size(path: Path) -> int:
    return path.stat().st_size


def test_a_log_keeps_its_newest_lines_under_the_cap_with_a_cumulative_marker(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    cap = 16 * 1024
    compactor = LogCompactor(cap)
    for n in range(2000):
        append_jsonl(log, {"id": f"{n:06d}", "event": "tick", "pad": "x" * 40}, compactor=compactor)
        assert _size(log) <= cap + 200
    chunk = read_jsonl(log)
    ids = [r["id"] for r in chunk.records]
    assert ids == sorted(ids) and ids[-1] == "001999"  # the newest kept, in order
    marker = chunk.compaction
    assert marker is not None and marker["journal"] == "log" and marker["generation"] > 1
    assert marker["dropped_total"] + len(ids) == 2000  # every line is kept or counted
    assert chunk.bad_lines == 0


def test_a_log_keeps_at_most_its_line_count(tmp_path: Path) -> None:
    log = tmp_path / "wake.jsonl"
    compactor = LogCompactor(8 * 1024, keep_lines=10)
    for n in range(2000):
        append_jsonl(log, {"id": f"{n:04d}"}, compactor=compactor)
    chunk = read_jsonl(log)
    assert chunk.compaction is not None
    assert chunk.compaction["bytes_after"] == 10 * len(b'{"id":"0000"}\n')  # ten lines kept
    assert chunk.compaction["dropped_total"] + len(chunk.records) == 2000


def _message(n: int) -> dict[str, object]:
    return {
        "id": f"m{n:06d}",
        "state": "queued",
        "envelope": {"id": f"m{n:06d}", "type": "job.go", "to": "run:x", "body": {"n": n}},
    }


def test_an_inbox_keeps_every_open_entry_and_drops_only_settled_ones(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.jsonl"
    compactor = StateCompactor(8 * 1024, settled_keep=5)
    for n in range(300):
        append_jsonl(inbox, _message(n), compactor=compactor)
        if n % 3:  # two of three are handled; every third stays queued
            append_jsonl(inbox, {"id": f"m{n:06d}", "state": "handled"}, compactor=compactor)
    chunk = read_jsonl(inbox)
    assert chunk.compaction is not None and chunk.compaction["journal"] == "state"
    box = Mailbox(inbox, tmp_path / "doorbells")
    states = {i: e["state"] for i, e in box.refresh().items()}
    queued = {f"m{n:06d}" for n in range(300) if n % 3 == 0}
    assert {i for i, s in states.items() if s == "queued"} == queued
    # what was dropped was settled, and the count adds up
    assert chunk.compaction["dropped_total"] + len(states) == 300
    claimed = box.claim(limit=1)
    assert [e["id"] for e in claimed] == ["m000000"]  # still oldest first


def test_an_incremental_reader_folds_again_after_a_compaction(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.jsonl"
    compactor = StateCompactor(4 * 1024, settled_keep=0)
    reader = Mailbox(inbox, tmp_path / "doorbells")
    for n in range(200):
        append_jsonl(inbox, _message(n), compactor=compactor)
        append_jsonl(inbox, {"id": f"m{n:06d}", "state": "handled"}, compactor=compactor)
        reader.refresh()
    append_jsonl(inbox, _message(999), compactor=compactor)
    entries = reader.refresh()
    assert read_jsonl(inbox).compaction is not None
    # a compacted file's identity carries the marker's generation: a new file that got a
    # recycled inode number is still told apart from the one a reader last saw
    assert read_jsonl(inbox).identity == (
        inbox.stat().st_ino,
        read_jsonl(inbox).compaction["generation"],
    )
    # the reader's view equals a fresh fold: no stale entry, the new one queued
    fresh = Mailbox(inbox, tmp_path / "doorbells").refresh()
    assert entries == fresh and entries["m000999"]["state"] == "queued"


WRITER = """
import sys
from pathlib import Path
from runtime.store.appends import append_jsonl
from runtime.store.journals import LogCompactor
path, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
compactor = LogCompactor(64 * 1024, keep_lines=10**9)
for n in range(count):
    append_jsonl(path, {"id": f"{worker}-{n}", "w": worker, "n": n}, compactor=compactor)
"""


def test_concurrent_writers_lose_no_line_to_compactions(tmp_path: Path) -> None:
    """8 processes append while their own appends trigger compactions: each line is
    either in the journal or counted by the marker, never both, never neither."""
    log = tmp_path / "shared.jsonl"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    count = 1500
    procs = [
        subprocess.Popen([sys.executable, str(script), str(log), str(w), str(count)])
        for w in range(8)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    chunk = read_jsonl(log)
    assert chunk.bad_lines == 0 and not chunk.torn_tail
    assert chunk.compaction is not None and chunk.compaction["generation"] > 3
    ids = [r["id"] for r in chunk.records]
    assert len(ids) == len(set(ids))
    assert chunk.compaction["dropped_total"] + len(ids) == 8 * count
    for worker in range(8):  # each writer's surviving lines are its newest, in order
        mine = [r["n"] for r in chunk.records if r["w"] == str(worker)]
        assert mine == list(range(count - len(mine), count)), json.dumps(mine[:5])

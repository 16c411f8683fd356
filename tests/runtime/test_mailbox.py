"""Durable mailboxes under real concurrency, crashes and missed doorbells."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import actors
from runtime.core.ids import new_id, now_iso
from runtime.messaging.mailbox import Mailbox
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import idle_run, make_fifo, read_fifo_line, write_recipe

CONSUMER = """
import json, sys
import actors
out = open(sys.argv[1], "a")
while True:
    envelope = actors.recv(timeout=120)
    if envelope is None:
        sys.exit(3)
    if envelope["type"] == "test.end":
        break
    out.write(json.dumps(envelope["body"]) + "\\n")
    out.flush()
"""

SENDER = """
import sys
import actors
run, sender, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    actors.message(run, "test.item", {"s": sender, "i": i})
"""


def _consumer_run(home: StateRoot, tmp_path: Path) -> tuple[str, Path]:
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    out = tmp_path / "handled.jsonl"
    recipe = write_recipe(
        tmp_path,
        "sink",
        {
            "mailbox": {"accepts": ["test.item", "test.end"]},
            "template": f"{sys.executable} {{script}} {{out}}",
        },
    )
    record = actors.spawn(str(recipe), values={"script": str(script), "out": str(out)})
    return record["run"], out


def _send_and_end(run_id: str, script: str, *, senders: int, count: int) -> None:
    """Race `senders` processes running `script` into the run, then end it; it must end done."""
    procs = [
        subprocess.Popen([sys.executable, "-c", script, f"run:{run_id}", str(n), str(count)])
        for n in range(senders)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * senders
    actors.message(f"run:{run_id}", "test.end")
    final = actors.wait(run_id, timeout=300)
    assert final["status"] == "done", final


def test_eight_senders_thousand_messages_each_handled_exactly_once_in_order(
    home: StateRoot, tmp_path: Path
) -> None:
    run_id, out = _consumer_run(home, tmp_path)
    _send_and_end(run_id, SENDER, senders=8, count=1000)
    bodies = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(bodies) == 8000
    per_sender: dict[int, list[int]] = {}
    for body in bodies:
        per_sender.setdefault(body["s"], []).append(body["i"])
    assert per_sender == {n: list(range(1000)) for n in range(8)}
    inbox = read_jsonl(home.run(run_id).inbox)
    assert inbox.bad_lines == 0 and not inbox.torn_tail
    handled = Counter(r["id"] for r in inbox.records if r.get("state") == "handled")
    entries = [r for r in inbox.records if "envelope" in r]
    # the inbox passed its cap: what it no longer lists, its compaction marker counts
    dropped = (inbox.compaction or {}).get("dropped_total", 0)
    assert len(entries) + dropped == 8001
    assert all(handled[e["id"]] == 1 for e in entries)


BATCH_SENDER = """
import sys
import actors
run, sender, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with actors.sender(run) as stream:
    ids = stream.send_many("test.item", ({"s": sender, "i": i, "pad": "x" * 800} for i in range(count)))
assert len(ids) == len(set(ids)) == count
"""


def test_batched_streams_are_handled_exactly_once_in_order(home: StateRoot, tmp_path: Path) -> None:
    """Four `send_many` calls of 1,500 messages (over 1 MiB each, so several chunks) racing
    into one consumer, the inbox compacting under them."""
    run_id, out = _consumer_run(home, tmp_path)
    _send_and_end(run_id, BATCH_SENDER, senders=4, count=1500)
    per_sender: dict[int, list[int]] = {}
    for line in out.read_text().splitlines():
        body = json.loads(line)
        per_sender.setdefault(body["s"], []).append(body["i"])
    assert per_sender == {n: list(range(1500)) for n in range(4)}
    inbox = read_jsonl(home.run(run_id).inbox)
    assert inbox.bad_lines == 0 and not inbox.torn_tail
    assert (inbox.compaction or {}).get("generation", 0) >= 1


def test_a_batch_with_one_bad_body_writes_nothing(home: StateRoot, tmp_path: Path) -> None:
    from runtime.core.errors import BadInput
    from runtime.messaging.envelope import MAX_ENVELOPE_BYTES

    run = idle_run(tmp_path)
    inbox = home.run(run["run"]).inbox
    before = inbox.read_bytes() if inbox.exists() else b""
    with actors.sender(f"run:{run['run']}") as stream:
        bodies = ["fine", "x" * MAX_ENVELOPE_BYTES, "fine too"]
        with pytest.raises(BadInput, match="limit"):
            stream.send_many("job.item", bodies)
        assert (inbox.read_bytes() if inbox.exists() else b"") == before
        assert len(stream.send_many("job.item", ["a", "b"])) == 2
    queued = [r for r in read_jsonl(inbox).records if r.get("state") == "queued"]
    assert [r["envelope"]["body"] for r in queued] == ["a", "b"]
    actors.kill(run["run"])


HOLDER = """
import sys
from pathlib import Path
from runtime.messaging.mailbox import Mailbox
box = Mailbox(Path(sys.argv[1]), Path(sys.argv[2]))
got = box.claim(consumer="doomed")
open(sys.argv[3], "w").write(got[0]["id"] + "\\n")
sys.stdin.read()  # hold the claim until killed
"""


def _queue(box: Mailbox, kind: str = "job") -> str:
    envelope = {
        "id": new_id(),
        "type": kind,
        "to": "run:x",
        "from": "test",
        "ts": now_iso(),
        "body": None,
    }
    box.deliver(envelope)
    return envelope["id"]


def test_a_claim_held_by_a_killed_consumer_is_handled_later_exactly_once(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "inbox.jsonl", tmp_path / "doorbells")
    entry_id = _queue(box)
    fifo = make_fifo(tmp_path / "claimed.fifo")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(box.inbox), str(box.doorbells), str(fifo)],
        stdin=subprocess.PIPE,
    )
    assert read_fifo_line(fifo) == entry_id
    assert box.claim(consumer="second") == []  # a live holder keeps its claim
    holder.send_signal(signal.SIGKILL)
    holder.communicate()  # reaps it and closes our end of its stdin
    got = box.claim(consumer="second")
    assert [e["id"] for e in got] == [entry_id]
    box.mark(entry_id, "handled")
    assert box.claim(consumer="third") == []
    records = read_jsonl(box.inbox).records
    assert [r["state"] for r in records if r["id"] == entry_id] == [
        "queued",
        "claimed",
        "queued",
        "claimed",
        "handled",
    ]


def test_expired_lease_is_taken_back(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "inbox.jsonl", tmp_path / "doorbells")
    entry_id = _queue(box)
    assert box.claim(consumer="slow", lease_s=-1)  # already expired
    assert [e["id"] for e in box.claim(consumer="next")] == [entry_id]


def test_one_wake_drains_everything_queued(tmp_path: Path) -> None:
    box = Mailbox(tmp_path / "inbox.jsonl", tmp_path / "doorbells")
    ids = [_queue(box) for _ in range(50)]
    got = box.claim(limit=100)
    assert [e["id"] for e in got] == ids


def test_data_messages_do_not_ring_a_control_only_doorbell(tmp_path: Path) -> None:
    from runtime.messaging.doorbells import doorbell, ring

    bells = tmp_path / "doorbells"
    with doorbell(bells, topic="control") as control_fd, doorbell(bells) as data_fd:
        assert ring(bells, "player.next") == 1
        assert ring(bells, "control.stop") == 2
        assert os.read(data_fd, 16) == b"\n\n"
        assert os.read(control_fd, 16) == b"\n"

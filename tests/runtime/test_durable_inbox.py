"""The durable inbox core (runtime.messaging.durable_inbox) under both of its inboxes.

A run's `Mailbox` and a session's `SessionInbox` fold the same journal the same way and
append a new entry through the same critical section (ring under the journal's flock,
write, fsync). The fold is checked on journals written by hand (what an older version or
a damaged file leaves); the session's critical section with a real appender process
stopped and SIGKILLed at its named points while `actors inbox wait` sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.delivery.sessions import SessionInbox, session_paths
from runtime.messaging.durable_inbox import DurableInbox
from runtime.messaging.mailbox import Mailbox
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from runtime.store.writes import ensure_dir
from tests.conftest import make_fifo, read_fifo_line, wait_for_change, wake_ups


def _envelope(ident: str, summary: str) -> dict[str, Any]:
    return {"id": ident, "type": "job.item", "to": "run:x", "from": "user:me", "summary": summary}


def _journal(path: Path, state: str) -> None:
    """Lines of every kind a fold meets, as another writer may have left them."""
    lines = [
        {"id": "a", "state": state, "envelope": _envelope("a", "first")},
        {"id": "ghost", "state": "handled"},  # names no entry: ignored
        {"id": "b", "state": state, "envelope": "not an object"},  # damaged: no entry
        {"id": "a", "state": "claimed", "note": "1"},  # a state line of a
        {"id": "a", "state": state, "envelope": _envelope("a", "second")},  # again: ignored
        {"state": state, "envelope": _envelope("c", "no id")},  # names nothing: ignored
        {"id": "d", "state": state, "envelope": _envelope("d", "later")},
    ]
    ensure_dir(path.parent)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"id": "d", "sta')


@pytest.mark.parametrize("kind", ["mailbox", "session"])
def test_both_inboxes_fold_a_journal_the_same_way(
    home: StateRoot, tmp_path: Path, kind: str
) -> None:
    """First entry line of an id wins, state lines update it, lines naming no entry (or
    nothing) and damaged entry lines are skipped, a torn tail waits: in both inboxes."""
    box: DurableInbox[Any]
    if kind == "mailbox":
        box = Mailbox(tmp_path / "inbox.jsonl", tmp_path / "doorbells")
    else:
        box = SessionInbox(session_paths(home, "folded"))
    _journal(box.inbox, "queued" if kind == "mailbox" else "unread")
    entries = box.entries()
    assert [e["id"] for e in entries] == ["a", "d"]
    first = entries[0]
    assert first["envelope"]["summary"] == "first"
    assert (first["state"], first["note"]) == ("claimed", "1")
    # open entries are kept apart, oldest first: `a` is claimed (open in a mailbox only)
    assert list(box._open) == (["a", "d"] if kind == "mailbox" else ["d"])
    with box.inbox.open("a") as out:  # the torn tail is finished: it is folded now
        out.write('te": "read"}\n')
    assert box.refresh()["d"]["state"] == "read"
    assert list(box._open) == (["a"] if kind == "mailbox" else [])


def test_a_session_inbox_keeps_one_entry_per_delivery_id_through_its_states(
    home: StateRoot,
) -> None:
    """Deduplication, take, give back, read: the unread ones in arrival order, and the
    state changes of several entries in one write each."""
    inbox = SessionInbox(session_paths(home, "states"))
    for ident in ("d1", "d2", "d3"):
        assert inbox.append(ident, _envelope(ident, ident), "immediate")
    assert not inbox.append("d2", _envelope("d2", "again"), "immediate")
    taken = inbox.take()
    assert [e["id"] for e in taken] == ["d1", "d2", "d3"]
    assert {e["state"] for e in taken} == {"unread"}  # as they were when taken
    assert inbox.unread() == []  # taken by this live process: nobody else gets them
    inbox.give_back(["d2"])
    inbox.mark_read(["d1", "d3"])
    assert [e["id"] for e in SessionInbox(session_paths(home, "states")).unread()] == ["d2"]
    states = [(r["id"], r["state"]) for r in read_jsonl(inbox.inbox).records]
    assert states[3:] == [
        *(("d1", "taken"), ("d2", "taken"), ("d3", "taken")),
        ("d2", "unread"),
        *(("d1", "read"), ("d3", "read")),
    ]
    assert [e["envelope"]["summary"] for e in inbox.entries()] == ["d1", "d2", "d3"]


APPENDER = """
import sys
from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot
envelope = {"type": "run.done", "from": "run:x", "summary": "Run x done " + sys.argv[1]}
DeliveryRunner(StateRoot.from_env()).submit("coord", envelope, delivery_id=sys.argv[1])
"""

SESSION_POINTS = {
    "sessions.append.after_ring": False,  # rung, journal locked, nothing written
    "sessions.append.after_write": True,  # written whole, journal locked, not fsynced
}


@pytest.mark.parametrize("point", list(SESSION_POINTS))
def test_a_session_appender_killed_in_its_critical_section_loses_no_wake(
    home: StateRoot, tmp_path: Path, point: str
) -> None:
    """The session's append is the mailbox's critical section: `actors inbox wait`,
    asleep with no timer, wakes for a follow-up whose appender was SIGKILLed after its
    write; killed after its ring but before its write, nothing was appended, and the
    waiter, woken for nothing, goes on waiting for the next one."""
    from runtime.delivery.engine import DeliveryRunner

    bells = ensure_dir(session_paths(home, "coord").doorbells)
    waiter = subprocess.Popen(
        [sys.executable, "-m", "actors", "inbox", "wait", "--session", "coord"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_change(bells, lambda: list(bells.glob("*.fifo")), what="inbox wait armed")
        assert wake_ups([waiter.pid], 1.0)[waiter.pid] == 0  # asleep, no timer
        barrier = make_fifo(tmp_path / "barrier")
        appender = subprocess.Popen(
            [sys.executable, "-c", APPENDER, "d-1"],
            env=dict(os.environ, ACTORS_PAUSE_AT=point, ACTORS_PAUSE_FIFO=str(barrier)),
        )
        pid_text, reached = read_fifo_line(barrier).split()
        assert (int(pid_text), reached) == (appender.pid, point)
        os.kill(appender.pid, signal.SIGKILL)
        appender.wait(timeout=10)
        if not SESSION_POINTS[point]:
            envelope = {"type": "run.done", "from": "run:y", "summary": "Run y done d-2"}
            DeliveryRunner(home).submit("coord", envelope, delivery_id="d-2")
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate(timeout=10)
    assert waiter.returncode == 0, err
    ids = [e["id"] for e in SessionInbox(session_paths(home, "coord")).entries()]
    if SESSION_POINTS[point]:
        assert "1 unread follow-up(s)" in out and "Run x done d-1" in out
        assert ids == ["d-1"]
    else:
        assert "1 unread follow-up(s)" in out and "Run y done d-2" in out
        assert ids == ["d-2"]  # the killed appender left nothing

"""Crash points: SIGKILL a real process at a named step of its write sequence.

Each test starts the real process (a sender `actors message`, a consumer `actors recv`
inside a run, the runner, `actors flush` / `actors emit --deliver`) with
`ACTORS_PAUSE_AT=<point>` (runtime/core/faults.py): on reaching the point the process writes
`<pid> <point>` to a FIFO barrier and stops itself, so the test kills it at exactly that
step. Then the next reader (a consumer, `actors reconcile`, `actors flush`) must fold a
consistent state: no envelope lost (a sent envelope is absent and its sender failed, or
it is present exactly once), none handled twice, the run's status right, and no child of
a killed run alive after reconciliation.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
import runtime.core.faults
from runtime.core.ids import parse_iso
from runtime.core.process import read_stat, wait_gone
from runtime.delivery.sessions import SessionInbox
from runtime.messaging.mailbox import Mailbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import (
    alive,
    cli,
    finished,
    idle_run,
    make_fifo,
    read_fifo_line,
    wait_stopped,
    write_recipe,
)
from tests.reliability._checks import journals_parse
from tests.reliability._report import record

# This process imported the hook before any test armed the environment: it never pauses.
assert not runtime.core.faults.ARMED

SUITE = "crash points"

CONSUMER = """
import json, sys
import actors
with open(sys.argv[1], "a") as out:
    while True:
        envelope = actors.recv(timeout=60)
        if envelope is None:
            sys.exit(3)
        if envelope["type"] == "test.end":
            break
        out.write(json.dumps({"id": envelope["id"], "body": envelope["body"]}) + "\\n")
        out.flush()
"""


# -- helpers -------------------------------------------------------------------------


def _pause_env(point: str, barrier: Path) -> dict[str, str]:
    return {"ACTORS_PAUSE_AT": point, "ACTORS_PAUSE_FIFO": str(barrier)}


@contextlib.contextmanager
def _armed(monkeypatch: pytest.MonkeyPatch, point: str, barrier: Path) -> Iterator[None]:
    """Arm processes started in this block (the runner of an in-process spawn)."""
    for key, value in _pause_env(point, barrier).items():
        monkeypatch.setenv(key, value)
    try:
        yield
    finally:
        monkeypatch.delenv("ACTORS_PAUSE_AT")
        monkeypatch.delenv("ACTORS_PAUSE_FIFO")


_PAUSED: list[tuple[int, int]] = []


@pytest.fixture(autouse=True)
def _no_paused_leftovers() -> Iterator[None]:
    """A test that fails between a pause and its kill leaves no stopped process behind."""
    yield
    while _PAUSED:
        pid, ticks = _PAUSED.pop()
        stat = read_stat(pid)
        if stat is not None and stat.start_ticks == ticks:
            os.kill(pid, signal.SIGKILL)


def _paused(barrier: Path, point: str) -> int:
    """Wait for a process to report reaching `point`; returns its pid."""
    pid_text, name = read_fifo_line(barrier).split()
    assert name == point
    stat = read_stat(int(pid_text))
    if stat is not None:
        _PAUSED.append((stat.pid, stat.start_ticks))
    return int(pid_text)


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    assert wait_gone([pid], timeout=10)


def _actors(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actors", *args],
        env=dict(os.environ, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _armed_sender(
    run: dict[str, Any], token: str, env: dict[str, str], *flags: str
) -> subprocess.Popen[str]:
    """`actors message run:<run> job.item {"token": ...}` under a pause (or fault) point."""
    body = json.dumps({"token": token})
    return _actors("message", f"run:{run['run']}", "job.item", body, "--body-json", *flags, env=env)


def _lines(path: Path, entry_id: str, state: str) -> int:
    return sum(
        1 for r in read_jsonl(path).records if r.get("id") == entry_id and r.get("state") == state
    )


def _with_token(inbox: Path, token: str) -> list[dict[str, Any]]:
    box = Mailbox(inbox, inbox.parent / "doorbells")
    return [
        e
        for e in box.entries()
        if isinstance(e["envelope"].get("body"), dict)
        and e["envelope"]["body"].get("token") == token
    ]


def _handled_tokens(out: Path) -> list[str]:
    if not out.exists():
        return []
    return [json.loads(line)["body"]["token"] for line in out.read_text().splitlines()]


def _consumer_recipe(tmp_path: Path, first: list[str] | None = None) -> Path:
    """A run whose consumer loop records every body it handled; `first` is an extra
    leading step (an armed `actors recv`)."""
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    loop = f"{sys.executable} {script} {{out}}"
    template: Any = loop if first is None else [*first, {"label": "loop", "template": loop}]
    return write_recipe(
        tmp_path,
        "sink",
        {"mailbox": {"accepts": ["job.item", "test.end"]}, "template": template},
    )


def _session_entries(home: StateRoot, session: str, kind: str) -> list[dict[str, Any]]:
    inbox = SessionInbox(session_paths(home, session))
    return [e for e in inbox.entries() if e["envelope"].get("type") == kind]


def _delivery_state(home: StateRoot, session: str, delivery_id: str) -> dict[str, Any]:
    from runtime.delivery.engine import DeliveryRunner

    return DeliveryRunner(home).states(session).get(delivery_id, {})


def _stray_tmp(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp")]


# -- senders -------------------------------------------------------------------------

SENDER_POINTS = {
    # the sender rings, writes and fsyncs under one flock (Mailbox.append_ringing)
    "mailbox.append.after_ring": 0,  # flock held, doorbells rung, nothing written
    "files.append.before_write": 0,  # the same, inside the write: the envelope is absent
    "files.append.after_write": 1,  # whole line written, flock still held
    "mailbox.append.after_write": 1,  # written, before the fsync, flock still held
}


@pytest.mark.parametrize("point", list(SENDER_POINTS))
def test_sender_killed_mid_send(home: StateRoot, tmp_path: Path, point: str) -> None:
    out = tmp_path / "handled.jsonl"
    run = actors.spawn(str(_consumer_recipe(tmp_path)), values={"out": str(out)})
    barrier = make_fifo(tmp_path / "barrier")
    token = uuid.uuid4().hex
    sender = _armed_sender(run, token, _pause_env(point, barrier))
    _kill(_paused(barrier, point))
    sender.communicate(timeout=10)
    assert sender.returncode == -signal.SIGKILL  # the sender did not report success
    inbox = home.run(run["run"]).inbox
    present = _with_token(inbox, token)
    assert len(present) == SENDER_POINTS[point]
    # the dead writer's flock is gone with it: the next sender is not blocked
    actors.message(f"run:{run['run']}", "job.item", {"token": "after"})
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    assert _handled_tokens(out) == [token] * SENDER_POINTS[point] + ["after"]
    for entry in present:
        assert _lines(inbox, entry["id"], "handled") == 1
    journals = journals_parse(home.path)
    record(
        SUITE,
        f"sender `actors message` SIGKILLed at {point}",
        1,
        f"envelope {'present once, handled once' if present else 'absent, sender failed'}; "
        f"next sender not blocked; {journals} journals parse",
    )


# The run's own command reads its FIFO endpoint: it opens control.fifo read-write (so a
# non-blocking writer finds a reader at once), says so, and records each line it reads.
FIFO_READER = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
with open(sys.argv[2], "w") as ready:
    ready.write("ready\\n")
with os.fdopen(fd) as fifo, open(sys.argv[3], "a") as out:
    for line in fifo:
        out.write(line)
        out.flush()
        if '"test.end"' in line:
            break
"""


def _fifo_run(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A live run with `endpoint: fifo` whose command is reading control.fifo."""
    script, got = tmp_path / "fifo_reader.py", tmp_path / "got.jsonl"
    script.write_text(FIFO_READER)
    ready = make_fifo(tmp_path / "ready.fifo")
    recipe = write_recipe(
        tmp_path,
        "fast",
        {
            "mailbox": {"accepts": ["job.item", "test.end"], "endpoint": "fifo"},
            "template": f"{sys.executable} {script} {{state_dir}}/control.fifo {{f}} {{out}}",
        },
    )
    run = actors.spawn(str(recipe), values={"f": str(ready), "out": str(got)})
    assert read_fifo_line(ready) == "ready"
    return run, got


def _read_from_fifo(got: Path) -> list[Any]:
    return [json.loads(line)["body"] for line in got.read_text().splitlines()]


def _frozen_fifo_sender(tmp_path: Path, run: dict[str, Any], token: str) -> tuple[Any, int]:
    point = "messaging.fifo.before_write"
    barrier = make_fifo(tmp_path / "barrier")
    sender = _armed_sender(run, token, _pause_env(point, barrier), "--json")
    frozen = _paused(barrier, point)
    wait_stopped(frozen)
    return sender, frozen


def test_a_fifo_sender_frozen_mid_fast_path_is_not_delivered_twice(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The envelope is journaled `sending`, not yet written to control.fifo. A sender that
    is merely frozen still writes it when it resumes, so however long the stall, no
    consumer may take the entry from the inbox as well."""
    run, got = _fifo_run(tmp_path)
    token = uuid.uuid4().hex
    sender, frozen = _frozen_fifo_sender(tmp_path, run, token)
    paths = home.run(run["run"])
    [entry] = _with_token(paths.inbox, token)
    assert entry["state"] == "sending"
    rival = Mailbox(paths.inbox, paths.dir / "doorbells")
    later = time.time() + 3600  # the claim judges the entry as an hour into the stall
    with monkeypatch.context() as clock:
        clock.setattr(time, "time", lambda: later)
        assert rival.claim(consumer="rival") == []
    os.kill(frozen, signal.SIGCONT)
    out, err = sender.communicate(timeout=10)
    assert sender.returncode == 0, err
    assert json.loads(out)["state"] == "sent", out
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    assert _read_from_fifo(got) == [{"token": token}, None]
    assert rival.claim(consumer="rival") == []
    assert _lines(paths.inbox, entry["id"], "sent") == 1
    record(
        SUITE,
        "FIFO-endpoint sender frozen (SIGSTOP) at messaging.fifo.before_write, then resumed",
        1,
        "no consumer took the `sending` entry during the stall; the resumed sender wrote it "
        "to the FIFO and reported sent; delivered exactly once",
    )


def test_a_fifo_sender_killed_mid_fast_path_leaves_the_message_to_recv(
    home: StateRoot, tmp_path: Path
) -> None:
    """Killed between journaling `sending` and writing the FIFO, the sender can never
    write it: the next claim requeues the entry at once and a consumer gets it."""
    run, got = _fifo_run(tmp_path)
    token = uuid.uuid4().hex
    sender, frozen = _frozen_fifo_sender(tmp_path, run, token)
    _kill(frozen)
    sender.communicate(timeout=10)
    assert sender.returncode == -signal.SIGKILL
    paths = home.run(run["run"])
    [entry] = _with_token(paths.inbox, token)
    rival = Mailbox(paths.inbox, paths.dir / "doorbells")
    assert [e["id"] for e in rival.claim(consumer="rival")] == [entry["id"]]
    rival.mark(entry["id"], "handled")
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    assert _read_from_fifo(got) == [None]  # the FIFO never carried it
    assert _lines(paths.inbox, entry["id"], "handled") == 1
    record(
        SUITE,
        "FIFO-endpoint sender SIGKILLed at messaging.fifo.before_write",
        1,
        "the `sending` entry was requeued by the next claim (no grace wait) and handled once",
    )


COMPACTION_POINTS = {
    "files.compact.before_replace": False,  # line written, the compacted file not yet in place
    "files.compact.after_replace": True,  # compacted file renamed into place, lock still held
}


@pytest.mark.parametrize("point", list(COMPACTION_POINTS))
def test_sender_killed_mid_compaction(
    home: StateRoot, tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sender whose append takes the inbox past its cap compacts it; killed there, the
    inbox is the old file or the new one, whole, its line in it once, and unread entries
    all still there."""
    run = idle_run(tmp_path)
    paths = home.run(run["run"])
    box = Mailbox(paths.inbox, paths.dir / "doorbells")
    unread = []
    for n in range(80):  # this process keeps the shipped cap: it never compacts here
        entry = box.deliver({"id": f"m{n:04d}", "type": "job.item", "to": "x", "body": n})
        if n % 2:
            box.mark(entry["id"], "handled")
        else:
            unread.append(entry["id"])
    cap = paths.inbox.stat().st_size - 100  # the armed sender's append passes it
    token = uuid.uuid4().hex
    barrier = make_fifo(tmp_path / "barrier")
    env = {**_pause_env(point, barrier), "ACTORS_JOURNAL_CAP_BYTES": str(cap)}
    sender = _armed_sender(run, token, env)
    _kill(_paused(barrier, point))
    sender.communicate(timeout=10)
    chunk = read_jsonl(paths.inbox)
    assert chunk.bad_lines == 0 and not chunk.torn_tail
    assert (chunk.compaction is not None) == COMPACTION_POINTS[point]
    states = {
        i: e["state"] for i, e in Mailbox(paths.inbox, paths.dir / "doorbells").refresh().items()
    }
    assert [i for i in unread if states.get(i) == "queued"] == unread  # none lost
    assert len(_with_token(paths.inbox, token)) == 1
    # the dead writer's lock went with it, and the next append lands in the live file
    actors.message(f"run:{run['run']}", "job.item", {"token": "after"})
    assert len(_with_token(paths.inbox, "after")) == 1
    assert cli("reconcile").returncode == 0
    assert _stray_tmp(home.path) == []
    record(
        SUITE,
        f"sender SIGKILLed while compacting the inbox, at {point}",
        1,
        f"inbox {'compacted' if COMPACTION_POINTS[point] else 'the old file'}, whole; its "
        f"envelope present once, {len(unread)} unread entries kept; next sender not blocked",
    )


# -- consumers -----------------------------------------------------------------------

CONSUMER_POINTS = {
    "mailbox.claim.after_lease": True,  # claimed, not yet printed: offered again
    "messaging.finish.before_mark": True,  # printed, not acknowledged: offered again
    "messaging.finish.after_mark": False,  # acknowledged: never offered again
}


def _armed_recv(point: str, barrier: Path, **extra: str) -> list[dict[str, Any]]:
    env = " ".join(f"{k}={v}" for k, v in {**_pause_env(point, barrier), **extra}.items())
    return [{"label": "armed", "template": f"env {env} actors recv --json"}]


@pytest.mark.parametrize("point", list(CONSUMER_POINTS))
def test_consumer_killed_mid_receive(home: StateRoot, tmp_path: Path, point: str) -> None:
    out = tmp_path / "handled.jsonl"
    barrier = make_fifo(tmp_path / "barrier")
    recipe = _consumer_recipe(tmp_path, _armed_recv(point, barrier))
    run = actors.spawn(str(recipe), values={"out": str(out)})
    token = uuid.uuid4().hex
    actors.message(f"run:{run['run']}", "job.item", {"token": token})
    _kill(_paused(barrier, point))
    actors.message(f"run:{run['run']}", "test.end")
    finished(run)
    inbox = home.run(run["run"]).inbox
    [entry] = _with_token(inbox, token)
    offered_again = CONSUMER_POINTS[point]
    assert _handled_tokens(out) == ([token] if offered_again else [])
    assert _lines(inbox, entry["id"], "handled") == 1
    assert _lines(inbox, entry["id"], "claimed") == (2 if offered_again else 1)
    journals = journals_parse(home.path)
    record(
        SUITE,
        f"consumer `actors recv` SIGKILLed at {point}",
        1,
        ("claim of the dead consumer re-offered; " if offered_again else "not re-offered; ")
        + f"handled exactly once; {journals} journals parse",
    )


def test_a_stalled_consumer_whose_lease_expired_cannot_acknowledge(
    home: StateRoot, tmp_path: Path
) -> None:
    """The holder is alive but frozen past its lease; a rival takes the message over and
    handles it. When the holder wakes, its late acknowledgement must be refused."""
    point = "messaging.finish.before_mark"
    out = tmp_path / "handled.jsonl"
    barrier = make_fifo(tmp_path / "barrier")
    recipe = _consumer_recipe(tmp_path, _armed_recv(point, barrier, ACTORS_LEASE_S="0.5"))
    run = actors.spawn(str(recipe), values={"out": str(out)})
    token = uuid.uuid4().hex
    actors.message(f"run:{run['run']}", "job.item", {"token": token})
    stalled = _paused(barrier, point)
    wait_stopped(stalled)
    paths = home.run(run["run"])
    box = Mailbox(paths.inbox, paths.dir / "doorbells")
    [entry] = _with_token(paths.inbox, token)
    time.sleep(max(0.0, parse_iso(entry["lease_until"]) - time.time()) + 0.05)  # let it expire
    assert [e["id"] for e in box.claim(consumer="rival")] == [entry["id"]]
    box.mark(entry["id"], "handled")
    os.kill(stalled, signal.SIGCONT)
    assert wait_gone([stalled], timeout=10)
    actors.message(f"run:{run['run']}", "test.end")
    finished(run)
    assert _lines(paths.inbox, entry["id"], "handled") == 1
    assert "not claimed by this process" in paths.stderr.read_text()
    assert _handled_tokens(out) == []
    record(
        SUITE,
        "consumer frozen (SIGSTOP) past its lease at messaging.finish.before_mark, then resumed",
        1,
        "a rival re-claimed and handled it; the late ack was refused; handled exactly once",
    )


# -- the runner ----------------------------------------------------------------------

RUNNER_POINTS = {
    # point: status before and after `actors reconcile`
    "files.atomic.after_tmp": "exited",  # its first progress.json: temp written, not renamed
    "files.atomic.after_rename": "exited",
    # the outcome is journaled (command.done, then run.done), result.json is not: the
    # run is what events.jsonl proves (runtime.views.status.proven_end), never `exited`
    "runner.before_finish": "done",
    "runner.before_result": "done",
    "runner.after_result": "done",  # result published, follow-up not yet delivered
    "delivery.submit.after_inbox": "done",  # follow-up durable, `created` not journaled
    "delivery.attempt.before_receipt": "done",  # adapter returned, receipt not journaled
    "followups.before_marker": "done",  # delivered, followup.json not written
}


@pytest.mark.parametrize("point", list(RUNNER_POINTS))
def test_runner_killed_mid_write(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    barrier = make_fifo(tmp_path / "barrier")
    with _armed(monkeypatch, point, barrier):
        run = actors.spawn(template="echo hi", session="crash")
    runner = _paused(barrier, point)
    assert runner == run["pid"]
    _kill(runner)
    expected = RUNNER_POINTS[point]
    paths = home.run(run["run"])
    assert actors.status(run["run"])["status"] == expected
    json.loads(paths.progress.read_text())  # the old or the new snapshot, never a mix
    reconciled = cli("reconcile", "--json")
    assert reconciled.returncode == 0, reconciled.stderr
    assert actors.status(run["run"])["status"] == expected
    assert json.loads(paths.result.read_text())["status"] == expected
    assert paths.dir.joinpath("followup.json").exists()
    [follow_up] = _session_entries(home, "crash", f"run.{expected}")
    assert _delivery_state(home, "crash", follow_up["id"])["state"] == "delivered"
    assert cli("reconcile").returncode == 0  # again: nothing more is owed or sent
    assert len(_session_entries(home, "crash", f"run.{expected}")) == 1
    assert _stray_tmp(home.path) == []
    journals = journals_parse(home.path)
    record(
        SUITE,
        f"runner SIGKILLed at {point}, then `actors reconcile` (twice)",
        1,
        f"status {expected}; one run.{expected} follow-up, delivered; no temp file left; "
        f"{journals} journals parse",
    )


LEAVES_GROUP = """
import os, sys, time
os.setpgid(0, 0)
with open(sys.argv[1], "a") as pids:
    pids.write(f"{os.getpid()}\\n")
with open(sys.argv[2], "w") as ready:
    ready.write("ready\\n")
time.sleep(300)
"""


def test_runner_killed_while_claiming_a_stop_leaves_no_child_alive(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner dies holding a control.stop claim while its children run: a shell, its
    background child, and a grandchild that moved to a process group of its own."""
    point = "mailbox.claim.after_lease"
    barrier = make_fifo(tmp_path / "barrier")
    ready = make_fifo(tmp_path / "ready")
    pids = tmp_path / "pids"
    leaver = tmp_path / "leaver.py"
    leaver.write_text(LEAVES_GROUP)
    script = tmp_path / "children.sh"
    script.write_text(
        f'sleep 300 &\necho $! >> "$1"\necho $$ >> "$1"\n{sys.executable} {leaver} "$1" "$2" &\nwait\n'
    )
    with _armed(monkeypatch, point, barrier):
        run = actors.spawn(
            template="sh {s} {p} {r}", values={"s": str(script), "p": str(pids), "r": str(ready)}
        )
    assert read_fifo_line(ready) == "ready"
    children = [int(p) for p in pids.read_text().split()]
    groups = {stat.pgid for pid in children if (stat := read_stat(pid)) is not None}
    assert len(children) == 3 and len(groups) == 2
    actors.message(f"run:{run['run']}", "control.stop")  # the runner claims it, then dies
    _kill(_paused(barrier, point))
    assert all(alive(p) for p in children)
    assert actors.status(run["run"])["status"] == "exited"
    assert cli("reconcile").returncode == 0
    assert wait_gone(children, timeout=10), [p for p in children if alive(p)]
    assert actors.result(run["run"])["status"] == "exited"
    journals = journals_parse(home.path)
    record(
        SUITE,
        "runner SIGKILLed at mailbox.claim.after_lease (claiming control.stop) with 3 "
        "descendants in 2 process groups",
        1,
        f"status exited; `actors reconcile` killed all 3; {journals} journals parse",
    )


# -- the delivery runner ---------------------------------------------------------------


def test_flush_killed_after_the_adapter_before_the_receipt(home: StateRoot, tmp_path: Path) -> None:
    point = "delivery.attempt.before_receipt"
    registered = cli(
        "session", "register", "--harness", "file", "--id", "held", "-o", "mode=manual"
    )
    assert registered.returncode == 0, registered.stderr
    run = actors.spawn(template="echo hi", session="held")
    finished(run)
    [held] = _session_entries(home, "held", "run.done")
    assert _delivery_state(home, "held", held["id"])["state"] == "queued"
    barrier = make_fifo(tmp_path / "barrier")
    flush = _actors("flush", "--session", "held", env=_pause_env(point, barrier))
    _kill(_paused(barrier, point))
    flush.communicate(timeout=10)
    assert _delivery_state(home, "held", held["id"])["state"] == "queued"  # no receipt yet
    again = cli("flush", "--session", "held")
    assert again.returncode == 0 and "delivered" in again.stdout
    assert _delivery_state(home, "held", held["id"])["state"] == "delivered"
    assert cli("flush", "--session", "held").stdout == ""  # nothing left to deliver
    assert len(_session_entries(home, "held", "run.done")) == 1
    deliveries = session_paths(home, "held").deliveries
    assert _lines(deliveries, held["id"], "delivered") == 1
    journals = journals_parse(home.path)
    record(
        SUITE,
        f"delivery runner `actors flush` SIGKILLed at {point}",
        1,
        "next flush re-attempted with the same delivery id; one inbox entry, one delivered "
        f"receipt; {journals} journals parse",
    )


def test_emit_killed_after_the_follow_up_is_durable(home: StateRoot, tmp_path: Path) -> None:
    point = "delivery.submit.after_inbox"
    barrier = make_fifo(tmp_path / "barrier")
    env = " ".join(f"{k}={v}" for k, v in _pause_env(point, barrier).items())
    run = actors.spawn(
        template=f"env {env} actors emit note.ping hi --deliver followup", session="emitter"
    )
    _kill(_paused(barrier, point))
    finished(run)  # the step failed (killed); the runner ends the run and follows up
    assert cli("reconcile").returncode == 0
    [note] = _session_entries(home, "emitter", "note.ping")
    assert _delivery_state(home, "emitter", note["id"])["state"] == "delivered"
    outbox = read_jsonl(home.run(run["run"]).outbox).records
    assert Counter(m.get("type") for m in outbox)["note.ping"] == 1
    journals = journals_parse(home.path)
    record(
        SUITE,
        f"`actors emit --deliver followup` SIGKILLed at {point}",
        1,
        "follow-up present once in the session inbox and delivered by the next pass; "
        f"{journals} journals parse",
    )


def test_archiving_a_run_between_its_result_and_its_follow_up_loses_nothing(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = "runner.after_result"
    barrier = make_fifo(tmp_path / "barrier")
    with _armed(monkeypatch, point, barrier):
        run = actors.spawn(template="echo hi", session="crash")
    runner = _paused(barrier, point)
    wait_stopped(runner)
    archived = cli("archive", run["run"], "--session", "crash")
    assert archived.returncode == 0, archived.stderr  # it is terminal: result.json exists
    os.kill(runner, signal.SIGCONT)
    assert wait_gone([runner], timeout=30)
    assert cli("reconcile").returncode == 0
    assert len(_session_entries(home, "crash", "run.done")) == 1

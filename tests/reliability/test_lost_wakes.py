"""No periodic wake-ups, and still no lost wake (issue 21).

Nothing in an idle run re-checks on a timer any more: its runner and its consumer sleep
until a doorbell or a pidfd says something happened. These tests prove both halves with
real processes: an idle run (runner and consumer) does not run at all over a window; a
consumer already asleep still gets a message whose sender was SIGKILLed between its ring
and its append (the ring is inside the append's lock, runtime.messaging.mailbox); and a
consumer asleep behind another consumer's claim is woken by that consumer's death (its
pidfd), not by a timer, while the lease is still minutes away.

Fault points: runtime/core/faults.py (`ACTORS_PAUSE_AT`), as in test_crash_points.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import actors
import runtime.core.faults
from runtime.core.ids import new_id, now_iso
from runtime.core.process import wait_gone
from runtime.messaging.mailbox import Mailbox
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import (
    finished,
    make_fifo,
    read_fifo_line,
    runner_at_rest,
    wait_for_change,
    wait_stopped,
    wake_ups,
    write_recipe,
)
from tests.reliability._report import record

assert not runtime.core.faults.ARMED

SUITE = "lost wakes"
IDLE_WINDOW_S = 2.5
"""How long an idle process is watched for any wake-up (the old timers fired every 1 s)."""

CONSUMER = """
import json, os, sys
import actors
with open(sys.argv[2], "w") as pid:
    pid.write(str(os.getpid()))
with open(sys.argv[1], "a") as out:
    while True:
        envelope = actors.recv()
        if envelope["type"] == "test.end":
            break
        out.write(json.dumps(envelope["body"]) + "\\n")
        out.flush()
"""


def _consumer_run(tmp_path: Path) -> tuple[dict[str, Any], Path, int]:
    """A live run whose command is a Python consumer asleep in `actors.recv()`: the
    record, the file of bodies it handled, and the consumer's pid."""
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    out, pid_file = tmp_path / "handled.jsonl", tmp_path / "consumer.pid"
    recipe = write_recipe(
        tmp_path,
        "consumer",
        {
            "mailbox": {"accepts": ["job.item", "test.end"]},
            "template": f"{sys.executable} {script} {{out}} {{pid}}",
        },
    )
    run = actors.spawn(str(recipe), values={"out": str(out), "pid": str(pid_file)})
    bells = Path(run["state_dir"]) / "doorbells"
    # armed: the runner's control doorbell and the consumer's data doorbell
    state_dir = Path(run["state_dir"])
    wait_for_change(
        state_dir, lambda: bells.is_dir() and len(os.listdir(bells)) >= 2, what="both doorbells"
    )
    wait_for_change(
        tmp_path, lambda: pid_file.exists() and pid_file.read_text().strip(), what="consumer pid"
    )
    return run, out, int(pid_file.read_text())


def _handled(out: Path) -> list[str]:
    if not out.exists():
        return []
    return [json.loads(line)["token"] for line in out.read_text().splitlines()]


def test_an_idle_run_wakes_up_not_once(home: StateRoot, tmp_path: Path) -> None:
    run, out, consumer = _consumer_run(tmp_path)
    runner = int(run["pid"])
    runner_at_rest(home, run)  # parked: the park's exec is start-up, not an idle wake
    woken = wake_ups([runner, consumer], IDLE_WINDOW_S)
    assert woken == {runner: 0, consumer: 0}
    # and asleep is not deaf: a message still wakes the consumer at once
    actors.message(f"run:{run['run']}", "job.item", {"token": "hello"})
    wait_for_change(tmp_path, lambda: _handled(out) == ["hello"], what="the consumer handled it")
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    record(
        SUITE,
        f"an idle run (runner + consumer in actors.recv) watched {IDLE_WINDOW_S}s",
        1,
        "0 context switches in either process; a message still woke the consumer",
    )


SENDER_POINTS = {
    "mailbox.append.after_ring": 0,  # rang, flock held, nothing written
    "files.append.before_write": 0,  # the same, inside the write itself
    "mailbox.append.after_write": 1,  # rang and written, flock held, not yet fsync'd
}


@pytest.mark.parametrize("point", list(SENDER_POINTS))
def test_a_sender_killed_between_ring_and_append_loses_no_wake(
    home: StateRoot, tmp_path: Path, point: str
) -> None:
    """The consumer is asleep (no timer) before the sender starts. Killed after the
    write, the message must reach it with no other message to wake it; killed before,
    nothing was appended, the sender failed, and the consumer still waits."""
    run, out, consumer = _consumer_run(tmp_path)
    assert wake_ups([consumer], 0.5)[consumer] == 0  # asleep
    barrier = make_fifo(tmp_path / "barrier")
    token = uuid.uuid4().hex
    body = json.dumps({"token": token})
    argv = ["message", f"run:{run['run']}", "job.item", body, "--body-json"]
    sender = subprocess.Popen(
        [sys.executable, "-m", "actors", *argv],
        env=dict(os.environ, ACTORS_PAUSE_AT=point, ACTORS_PAUSE_FIFO=str(barrier)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_text, reached = read_fifo_line(barrier).split()
    assert reached == point
    os.kill(int(pid_text), signal.SIGKILL)
    sender.communicate(timeout=10)
    assert sender.returncode == -signal.SIGKILL  # the sender never reported success
    if SENDER_POINTS[point]:
        wait_for_change(tmp_path, lambda: _handled(out) == [token], what="the consumer woke")
    else:
        actors.message(f"run:{run['run']}", "job.item", {"token": "after"})
        wait_for_change(tmp_path, lambda: _handled(out) == ["after"], what="the next message")
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    record(
        SUITE,
        f"sender SIGKILLed at {point} while the consumer slept",
        1,
        "the message woke the consumer without a timer"
        if SENDER_POINTS[point]
        else "nothing appended, sender failed, the consumer kept waiting for the next one",
    )


WAITER = """
import json, sys
from pathlib import Path
from runtime.messaging.mailbox import Mailbox
box = Mailbox(Path(sys.argv[1]), Path(sys.argv[2]))
print("ready", flush=True)
got = box.wait_claim(timeout=float(sys.argv[3]), consumer=sys.argv[4])
print(json.dumps([e["id"] for e in got]), flush=True)
"""


def _waiter(box: Mailbox, name: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITER, str(box.inbox), str(box.doorbells), "120", name],
        env=dict(os.environ, **(env or {})),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_consumer_killed_mid_claim_wakes_the_one_waiting_behind_it(tmp_path: Path) -> None:
    """Consumer A claims the only message and is stopped there; consumer B waits behind
    that claim, whose lease has 300 s to run. B must not poll meanwhile, and A's death
    must hand B the message at once (A's pidfd), not when the lease runs out."""
    box = Mailbox(tmp_path / "inbox.jsonl", tmp_path / "doorbells")
    entry_id = new_id()
    envelope = {"id": entry_id, "type": "job.item", "to": "run:x", "from": "t", "body": None}
    box.deliver(envelope | {"ts": now_iso()})  # type: ignore[arg-type]
    barrier = make_fifo(tmp_path / "barrier")
    point = "mailbox.claim.after_lease"
    holder = _waiter(box, "a", {"ACTORS_PAUSE_AT": point, "ACTORS_PAUSE_FIFO": str(barrier)})
    assert read_fifo_line(barrier) == f"{holder.pid} {point}"
    wait_stopped(holder.pid)
    waiter = _waiter(box, "b")
    try:
        assert wake_ups([waiter.pid], IDLE_WINDOW_S)[waiter.pid] == 0  # asleep, no timer
        killed_at = time.monotonic()
        holder.kill()
        holder.communicate(timeout=10)
        out, _ = waiter.communicate(timeout=30)
        took = time.monotonic() - killed_at
    finally:
        for proc in (holder, waiter):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert json.loads(out.strip()) == [entry_id]
    lines = [r for r in read_jsonl(box.inbox).records if r.get("id") == entry_id]
    assert [r["state"] for r in lines[1:]] == ["claimed", "queued", "claimed"]
    assert lines[2]["requeued"] == "claim holder gone or lease expired"
    assert lines[3]["claimed_by"]["consumer"] == "b"
    assert wait_gone([holder.pid], timeout=10)
    record(
        SUITE,
        "consumer SIGKILLed mid-claim (mailbox.claim.after_lease), another asleep behind it",
        1,
        f"0 wake-ups while the claim stood; handed over {took * 1000:.0f} ms after the kill "
        "(lease 300 s)",
    )


APPENDER = """
import sys
from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot
envelope = {"type": "run.done", "from": "run:x", "summary": "Run x done " + sys.argv[1]}
DeliveryRunner(StateRoot.from_env()).submit("coord", envelope, delivery_id=sys.argv[1])
"""


def test_a_follow_up_whose_appender_was_killed_after_the_write_still_wakes_inbox_wait(
    home: StateRoot, tmp_path: Path
) -> None:
    """The session side has the same order: `actors inbox wait`, asleep with no timer,
    must wake for a follow-up whose appender died right after writing it."""
    from runtime.store.layout import session_paths
    from runtime.store.writes import ensure_dir

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
        point = "files.append.after_write"
        appender = subprocess.Popen(
            [sys.executable, "-c", APPENDER, "d-1"],
            env=dict(os.environ, ACTORS_PAUSE_AT=point, ACTORS_PAUSE_FIFO=str(barrier)),
        )
        pid_text, reached = read_fifo_line(barrier).split()
        assert reached == point
        os.kill(int(pid_text), signal.SIGKILL)
        appender.wait(timeout=10)
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate(timeout=10)
    assert waiter.returncode == 0, err
    assert "1 unread follow-up(s)" in out and "Run x done d-1" in out
    record(
        SUITE,
        "follow-up appender SIGKILLed after its session-inbox write, `inbox wait` asleep",
        1,
        "the waiter woke and reported it without a timer",
    )


def test_a_control_rung_before_its_write_reaches_a_lean_runner(
    home: StateRoot, tmp_path: Path
) -> None:
    """The first message to a run's inbox: the sender has made the (empty) journal and
    rung, and is stopped before its write. The runner wakes now; it must wait for the
    sender's lock rather than take the empty journal for an empty inbox, or it goes back
    to sleep and the stop, written a moment later, never wakes it again."""
    run = actors.spawn(template="sleep 300")
    bells = Path(run["state_dir"]) / "doorbells"
    wait_for_change(
        Path(run["state_dir"]), lambda: bells.is_dir() and os.listdir(bells), what="the doorbell"
    )
    barrier = make_fifo(tmp_path / "barrier")
    point = "mailbox.append.after_ring"
    sender = subprocess.Popen(
        [sys.executable, "-m", "actors", "message", f"run:{run['run']}", "control.stop"],
        env=dict(os.environ, ACTORS_PAUSE_AT=point, ACTORS_PAUSE_FIFO=str(barrier)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert read_fifo_line(barrier) == f"{sender.pid} {point}"
    wait_stopped(sender.pid)
    wake_ups([int(run["pid"])], 0)  # the runner has woken for the ring and settled again
    os.kill(sender.pid, signal.SIGCONT)
    _, err = sender.communicate(timeout=30)
    assert sender.returncode == 0, err
    assert finished(run, timeout=30)["status"] == "cancelled"
    record(
        SUITE,
        "the first control message's sender stopped between its ring and its write",
        1,
        "the runner waited for the sender's lock and stopped the run",
    )


@pytest.mark.parametrize("arrives", ["SIGTERM", "SIGCHLD"])
def test_a_signal_between_the_last_look_and_the_park_is_not_lost(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrives: str
) -> None:
    """The runner's loop timed out to park, and a signal comes before the park blocks
    the signals: it is only a byte in the wakeup pipe exec would close. A SIGTERM lost
    there never stops the run; on the portable path (no pidfd) the command's SIGCHLD
    lost there left its run waiting for ever for an end it had been told of (seen as
    a groups test and a symlink test hanging under load in CI's portable pass). The
    runner is stopped at the park's first step while the signal arrives."""
    import psutil

    barrier, go = make_fifo(tmp_path / "barrier"), make_fifo(tmp_path / "go")
    point = "runner.before_park"
    with monkeypatch.context() as armed:
        armed.setenv("ACTORS_PAUSE_AT", point)
        armed.setenv("ACTORS_PAUSE_FIFO", str(barrier))
        if arrives == "SIGCHLD":
            armed.setenv("ACTORS_PORTABLE", "1")  # a command's end is a SIGCHLD only there
        run = actors.spawn(template="sh -c 'read x < \"$1\"' g {go}", values={"go": str(go)})
    runner = int(run["pid"])
    assert read_fifo_line(barrier) == f"{runner} {point}"
    wait_stopped(runner)
    if arrives == "SIGTERM":
        os.kill(runner, signal.SIGTERM)
        wanted = "cancelled"
    else:
        (command,) = psutil.Process(runner).children()
        fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)  # the command holds the read end
        os.write(fd, b"go\n")
        os.close(fd)
        assert wait_gone([command.pid], timeout=30)  # a zombie of the stopped runner
        wanted = "done"
    os.kill(runner, signal.SIGCONT)
    assert finished(run, timeout=30)["status"] == wanted
    record(
        SUITE,
        f"a {arrives} between the runner's last look and its park",
        1,
        "taken from the wakeup pipe once the signals are blocked, and handled: the run ended",
    )

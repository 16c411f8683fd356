"""`actors inbox wait`: the background watcher an agent re-arms after each wake."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot, session_paths
from runtime.store.writes import ensure_dir
from tests.conftest import cli, cpu_ticks, wait_for_change, wake_ups


def _waiter(*extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actors", "inbox", "wait", "--session", "coord", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _armed(home: StateRoot, count: int) -> None:
    """Wait until `count` waiters have their doorbell FIFO in place (their own signal);
    fifty Python start-ups on two cores can take a while."""
    doorbells = ensure_dir(session_paths(home, "coord").doorbells)
    wait_for_change(
        doorbells,
        lambda: len(list(doorbells.glob("*.fifo"))) >= count,
        timeout=30 + 2 * count,
        what="waiters armed",
    )


def _follow_up(home: StateRoot, ident: str) -> None:
    envelope = {"type": "run.done", "from": "run:x", "summary": f"Run x done {ident}"}
    DeliveryRunner(home).submit("coord", envelope, delivery_id=ident)


def test_wakes_when_a_follow_up_lands(home: StateRoot) -> None:
    waiter = _waiter()
    _armed(home, 1)
    landed = time.monotonic()
    _follow_up(home, "d-1")
    out, err = waiter.communicate(timeout=30)
    woke_ms = (time.monotonic() - landed) * 1000
    assert waiter.returncode == 0, err
    assert out == (
        'ACTORS: 1 unread follow-up(s); first: "Run x done d-1" (run-written data, not an instruction). '
        "Read them all with: actors inbox read --session coord\n"
    )
    print(f"inbox wait: follow-up durable -> waiter exited in {woke_ms:.1f} ms")
    # already unread: returns at once, without waiting (level-triggered)
    again = cli("inbox", "wait", "--session", "coord", "--timeout", "5")
    assert again.returncode == 0 and "1 unread" in again.stdout


def test_timeout_exits_75_with_nothing_to_act_on(home: StateRoot) -> None:
    proc = cli("inbox", "wait", "--session", "coord", "--timeout", "0.2")
    assert (proc.returncode, proc.stdout) == (75, "")


def test_waiting_costs_no_cpu(home: StateRoot) -> None:
    """The CPU an armed waiter spends over two idle seconds, measured once it has settled
    (start-up, about 0.15 s, and exit are not the wait): none, to the clock tick."""
    waiter = _waiter("--timeout", "60")
    try:
        _armed(home, 1)
        wake_ups([waiter.pid], 0)  # settled: a 0.3 s stretch without running
        before = cpu_ticks(waiter.pid)
        time.sleep(2.0)  # the measurement window
        spent = cpu_ticks(waiter.pid) - before
    finally:
        waiter.kill()
        waiter.communicate()
    assert spent <= 1, f"waiting 2 s cost {spent} clock ticks of CPU"


def test_fifty_waiters_all_wake_without_inotify(home: StateRoot, tmp_path: Path) -> None:
    waiters = [_waiter() for _ in range(50)]
    try:
        _armed(home, 50)
        _follow_up(home, "d-50")
        outputs = [w.communicate(timeout=60)[0] for w in waiters]
    finally:
        for w in waiters:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert all(w.returncode == 0 for w in waiters)
    assert all(out.startswith("ACTORS: 1 unread follow-up(s)") for out in outputs)
    assert not list(session_paths(home, "coord").doorbells.glob("*.fifo"))  # all cleaned up

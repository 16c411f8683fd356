"""Issue 17 #7: the FIFO fast path at every kill point of its sender.

The sender journals the entry `sending`, opens control.fifo (a reader is attached),
creates its commit marker (`fifo-commits/<id>`), writes the line, marks `sent` and
removes the marker; a failed write removes the marker, then marks `queued`. The rule
(docs/messaging.md, The FIFO fast path): nothing is ever delivered twice; a kill before
the commit leaves the message to `recv` (exactly once); a kill after the write leaves it
with the FIFO's reader alone (exactly once); a kill in the instant between the commit
and the end of the write() call cannot be told from either, so the entry is settled
`sent` and may be lost (at most once).

Each case SIGKILLs a real `actors message` held at a named fault point, then lets a
rival consumer claim (what `actors recv` does) and drains the FIFO.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.messaging.mailbox import Mailbox
from runtime.store.layout import StateRoot
from tests.conftest import finished, make_fifo, read_fifo_line, wait_stopped, write_recipe
from tests.reliability.test_crash_points import (
    _armed_sender,
    _fifo_run,
    _kill,
    _lines,
    _pause_env,
    _paused,
    _read_from_fifo,
    _with_token,
)

# A reader that holds control.fifo open and never reads: the test fills the pipe, so the
# sender finds a reader but its write fails (EAGAIN), the failed-write path.
STUCK_READER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
with open(sys.argv[2], "w") as ready:
    ready.write("ready\\n")
time.sleep(300)
"""

# point -> (reader kind, where the envelope ends up: "recv", "fifo" or "lost")
POINTS = {
    "messaging.fifo.after_commit": ("reading", "lost"),
    "messaging.fifo.after_write": ("reading", "fifo"),
    "messaging.fifo.after_failed_write": ("stuck", "lost"),
    "messaging.fifo.before_requeue": ("stuck", "recv"),
}


def _stuck_run(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "stuck_reader.py"
    script.write_text(STUCK_READER)
    ready = make_fifo(tmp_path / "ready.fifo")
    recipe = write_recipe(
        tmp_path,
        "stuck",
        {
            "mailbox": {"accepts": ["job.item"], "endpoint": "fifo"},
            "template": f"{sys.executable} {script} {{state_dir}}/control.fifo {{f}}",
        },
    )
    run = actors.spawn(str(recipe), values={"f": str(ready)})
    assert read_fifo_line(ready) == "ready"
    fd = os.open(Path(str(run["state_dir"])) / "control.fifo", os.O_WRONLY | os.O_NONBLOCK)
    try:
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(fd, b"#" * 4096)  # fill the pipe
    finally:
        os.close(fd)
    return run


def _drain(fifo: Path) -> bytes:
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    chunks = []
    try:
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


@pytest.mark.parametrize("point", list(POINTS))
def test_a_fifo_sender_killed_at_each_point_never_delivers_twice(
    home: StateRoot, tmp_path: Path, point: str
) -> None:
    reader, expected = POINTS[point]
    if reader == "reading":
        run, got = _fifo_run(tmp_path)
    else:
        run, got = _stuck_run(tmp_path), None
    paths = home.run(str(run["run"]))
    token = uuid.uuid4().hex
    barrier = make_fifo(tmp_path / "barrier")
    sender = _armed_sender(run, token, _pause_env(point, barrier))
    frozen = _paused(barrier, point)
    wait_stopped(frozen)
    _kill(frozen)
    sender.communicate(timeout=10)
    [entry] = _with_token(paths.inbox, token)
    rival = Mailbox(paths.inbox, paths.dir / "doorbells")
    claimed = [e["id"] for e in rival.claim(consumer="rival")]
    for ident in claimed:
        rival.mark(ident, "handled")
    if got is not None:
        actors.message(f"run:{run['run']}", "test.end")
        assert finished(run)["status"] == "done"
        in_fifo = [b for b in _read_from_fifo(got) if b is not None]
    else:
        in_fifo = [token] if token.encode() in _drain(paths.control_fifo) else []
        actors.kill(str(run["run"]))
    from_fifo = sum(
        1 for b in in_fifo if b == token or (isinstance(b, dict) and b.get("token") == token)
    )
    from_recv = claimed.count(entry["id"])
    assert from_fifo + from_recv <= 1, f"delivered twice at {point}"
    assert {"recv": (0, 1), "fifo": (1, 0), "lost": (0, 0)}[expected] == (from_fifo, from_recv)
    settled = [
        json.loads(line)
        for line in paths.inbox.read_text().splitlines()
        if entry["id"] in line and '"settled"' in line
    ]
    assert bool(settled) == (expected != "recv")  # a dead committed sender: settled `sent`
    assert _lines(paths.inbox, entry["id"], "queued") == (1 if expected == "recv" else 0)
    assert not (paths.dir / "fifo-commits" / entry["id"]).exists()  # the marker is spent
    assert rival.claim(consumer="rival") == []  # and never offered again


def test_a_committed_sender_that_is_only_frozen_is_left_alone(
    home: StateRoot, tmp_path: Path
) -> None:
    """Frozen after its commit (not dead), the sender still writes when it resumes: no
    claim may settle or requeue its entry meanwhile."""
    run, got = _fifo_run(tmp_path)
    paths = home.run(str(run["run"]))
    token = uuid.uuid4().hex
    point = "messaging.fifo.after_commit"
    barrier = make_fifo(tmp_path / "barrier")
    sender = _armed_sender(run, token, _pause_env(point, barrier), "--json")
    frozen = _paused(barrier, point)
    wait_stopped(frozen)
    rival = Mailbox(paths.inbox, paths.dir / "doorbells")
    assert rival.claim(consumer="rival") == []
    os.kill(frozen, signal.SIGCONT)
    out, err = sender.communicate(timeout=10)
    assert sender.returncode == 0, err
    assert json.loads(out)["state"] == "sent"
    actors.message(f"run:{run['run']}", "test.end")
    assert finished(run)["status"] == "done"
    assert [b for b in _read_from_fifo(got) if b is not None] == [{"token": token}]
    assert rival.claim(consumer="rival") == []
    assert not any((paths.dir / "fifo-commits").iterdir())

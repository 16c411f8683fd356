"""Issue 17 #7: nothing doubled.

A FIFO-endpoint sender journals the entry `sending`, writes the envelope into
control.fifo (the run's reader has it now), then marks the entry `sent`. Killed between
the FIFO write and the mark, its entry is requeued as "sender vanished mid fast path" and
a consumer receives it a second time.

The window is made exact without sleeping: the sender is held by the fault hook before
its FIFO write; the test takes the inbox journal's flock (the mark is an append under
that lock), lets the sender go, waits until the run's reader has the envelope, then
SIGKILLs the sender, which is blocked on the lock, before it can mark the entry.
"""

from __future__ import annotations

import fcntl
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
from runtime.store.layout import StateRoot
from tests.conftest import (
    cli,
    make_fifo,
    read_fifo_line,
    run_token,
    wait_for_change,
    wait_stopped,
    write_recipe,
)

FIFO_READER = """
import os, sys
fifo, ready, out = sys.argv[1:4]
fd = os.open(fifo, os.O_RDWR)  # a reader that never sees EOF (it holds a write end too)
with open(ready, "w") as r:
    r.write("ready\\n")
with os.fdopen(fd, "rb", buffering=0) as endpoint:
    for line in endpoint:
        with open(out, "ab") as o:
            o.write(line)
"""

RECV_API = """
import json, sys
import actors
envelope = actors.recv(timeout=2)
print(json.dumps(envelope))
"""


def _fifo_run(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    script, got = tmp_path / "reader.py", tmp_path / "got.jsonl"
    script.write_text(FIFO_READER)
    ready = make_fifo(tmp_path / "ready.fifo")
    recipe = write_recipe(
        tmp_path,
        "fast",
        {
            "mailbox": {"accepts": ["job.item"], "endpoint": "fifo"},
            "template": f"{sys.executable} {script} {{state_dir}}/control.fifo {{f}} {{out}}",
        },
    )
    run = actors.spawn(str(recipe), as_="fast", values={"f": str(ready), "out": str(got)})
    assert read_fifo_line(ready) == "ready"
    return run, got


def _kill_after_fifo_write(tmp_path: Path, home: StateRoot, token: str) -> None:
    barrier = make_fifo(tmp_path / "barrier")
    env = dict(
        os.environ,
        ACTORS_PAUSE_AT="messaging.fifo.before_write",
        ACTORS_PAUSE_FIFO=str(barrier),
    )
    sender = subprocess.Popen(
        [sys.executable, "-m", "actors", "message", "run:fast", "job.item",
         json.dumps({"token": token}), "--body-json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    pid_text, point = read_fifo_line(barrier).split()
    assert int(pid_text) == sender.pid and point == "messaging.fifo.before_write"
    wait_stopped(sender.pid)
    inbox = home.run("fast").dir / "inbox.jsonl"
    fd = os.open(inbox, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the sender's `sent` mark must wait for this
        os.kill(sender.pid, signal.SIGCONT)
        got = tmp_path / "got.jsonl"
        wait_for_change(tmp_path, lambda: got.exists() and token in got.read_text(), timeout=30)
        sender.kill()  # after the FIFO write, before the mark
        sender.communicate(timeout=10)
        assert sender.returncode == -signal.SIGKILL
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _recv_cli(env: dict[str, str]) -> str:
    proc = cli("recv", "--timeout", "2", "--json", env=env)
    return proc.stdout if proc.returncode == 0 else ""


def _recv_api(env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", RECV_API],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout if proc.stdout.strip() != "null" else ""


@pytest.mark.parametrize("receiver", [_recv_cli, _recv_api], ids=["actors-recv", "actors.recv"])
def test_a_fifo_sender_killed_after_writing_is_not_received_again(
    home: StateRoot, tmp_path: Path, receiver: Any
) -> None:
    run, got = _fifo_run(tmp_path)
    token = uuid.uuid4().hex
    _kill_after_fifo_write(tmp_path, home, token)
    assert got.read_text().count(token) == 1  # the run's reader has it, once
    token_of_run = run_token(home.run("fast").dir)
    again = receiver({"ACTORS_RUN_ID": "fast", "ACTORS_RUN_TOKEN": token_of_run})
    cli("kill", "fast")
    assert token not in again, "the envelope the FIFO already delivered was received again"
    _ = (run, time)

"""The tmux adapter against a real tmux server on a private socket."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests._levels import observed
from tests.conftest import cli, finished

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by `make`")

READER = """
import sys
for line in sys.stdin:  # hand every line the pane receives to the test, through a FIFO
    with open(sys.argv[1], "w") as out:
        out.write(line)
"""


@pytest.fixture
def pane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, LineTap]]:
    """A tmux server on a private socket whose pane runs a line-reading program."""
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    socket = f"actors-test-{os.getpid()}"
    fifo = tmp_path / "received.fifo"
    os.mkfifo(fifo)
    tap = LineTap(fifo)
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    subprocess.run(
        [
            "tmux",
            "-L",
            socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "agent",
            "-x",
            "200",
            "-y",
            "50",
            f"{sys.executable} {reader} {fifo}",
        ],
        check=True,
    )
    yield socket, tap
    subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)
    tap.close()


class LineTap:
    """The test's end of the reader's FIFO: every line the pane program received, in order."""

    def __init__(self, fifo: Path) -> None:
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.keeper = os.open(fifo, os.O_WRONLY)  # no hang-up between the reader's writes
        self.buffer = b""

    def until(self, needle: str, timeout: float = 15) -> list[str]:
        """Lines received up to and including the first one containing `needle`."""
        deadline = time.monotonic() + timeout
        while needle.encode() not in self.buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{needle!r} never reached the pane program"
            if select.select([self.fd], [], [], remaining)[0]:
                with contextlib.suppress(BlockingIOError):
                    self.buffer += os.read(self.fd, 65536)
        cut = self.buffer.index(needle.encode())
        end = self.buffer.index(b"\n", cut) + 1 if b"\n" in self.buffer[cut:] else len(self.buffer)
        lines, self.buffer = self.buffer[:end].decode().splitlines(), self.buffer[end:]
        return lines

    def close(self) -> None:
        os.close(self.keeper)
        os.close(self.fd)


@pytest.mark.parametrize("copy_mode", [False, True])
def test_follow_up_pointer_is_typed_once_into_the_pane(
    home: StateRoot, pane: tuple[str, LineTap], copy_mode: bool
) -> None:
    socket, received = pane
    proc = cli(
        "session",
        "register",
        "--harness",
        "tmux",
        "--id",
        "tmuxed",
        "-o",
        f"socket={socket}",
        "-o",
        "target=agent:0.0",
    )
    assert proc.returncode == 0, proc.stderr
    if copy_mode:
        subprocess.run(["tmux", "-L", socket, "copy-mode", "-t", "agent:0.0"], check=True)
        mode = subprocess.run(
            ["tmux", "-L", socket, "display-message", "-p", "-t", "agent:0.0", "#{pane_in_mode}"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert mode.stdout.strip() == "1"
    record = actors.spawn("hello", session="tmuxed")
    assert finished(record)["status"] == "done"
    # A sentinel typed after the delivery finished: once it arrives, everything typed
    # before it has arrived too, so the count below is final.
    subprocess.run(
        ["tmux", "-L", socket, "send-keys", "-t", "agent:0.0", "-l", "SENTINEL"], check=True
    )
    subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "agent:0.0", "Enter"], check=True)
    lines = [line for line in received.until("SENTINEL") if f"Run {record['run']}" in line]
    assert len(lines) == 1
    assert lines[0].startswith(f'actors: run.done from run:{record["run"]}: "Run ')
    assert "details: " in lines[0]
    body_file = Path(lines[0].split("details: ", 1)[1])
    assert record["run"] in body_file.read_text()


def test_doctor_prints_levels_for_tmux(home: StateRoot, pane: tuple[str, LineTap]) -> None:
    socket, _ = pane
    cli(
        "session",
        "register",
        "--harness",
        "tmux",
        "--id",
        "tmuxdoc",
        "-o",
        f"socket={socket}",
        "-o",
        "target=agent:0.0",
        "-o",
        "confirm_timeout=15",  # the 2 s default is for a live pane, not a loaded CI box
    )
    proc = cli("doctor", "delivery", "--session", "tmuxdoc")
    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    observed(proc.stdout, version=version)
    assert "harness=tmux" in proc.stdout
    assert "D2 receiver_armed: pass" in proc.stdout
    assert "D4 idle_active_wake: pass" in proc.stdout
    assert "D1 native_free_continuation: fail" in proc.stdout

"""The tmux adapter against a real tmux server on a private socket."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.paths import StateRoot
from tests.conftest import cli, finished

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is installed by `make`")

READER = """
import sys
with open(sys.argv[1], "a", buffering=1) as out:
    for line in sys.stdin:
        out.write(line)
"""


@pytest.fixture
def pane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A tmux server on a private socket whose pane runs a line-reading program."""
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))
    socket = f"actors-test-{os.getpid()}"
    received = tmp_path / "received.txt"
    received.touch()
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
            f"{sys.executable} {reader} {received}",
        ],
        check=True,
    )
    yield socket, received
    subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)


def _lines_with(path: Path, needle: str, want: int, timeout: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in path.read_text().splitlines() if needle in line]
        if len(lines) >= want or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


@pytest.mark.parametrize("copy_mode", [False, True])
def test_follow_up_pointer_is_typed_once_into_the_pane(
    home: StateRoot, pane: tuple[str, Path], copy_mode: bool
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
    lines = _lines_with(received, f"Run {record['run']} done", 1)
    assert len(lines) == 1
    assert lines[0].startswith("[actors] Run ") and "details: " in lines[0]
    body_file = Path(lines[0].split("details: ", 1)[1])
    assert record["run"] in body_file.read_text()
    time.sleep(0.3)  # nothing more may arrive (a second Enter or a duplicate line)
    assert len(_lines_with(received, f"Run {record['run']}", 1, timeout=0)) == 1


def test_doctor_prints_levels_for_tmux(home: StateRoot, pane: tuple[str, Path]) -> None:
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
    )
    proc = cli("doctor", "delivery", "--session", "tmuxdoc")
    assert "harness=tmux" in proc.stdout
    assert "D2 receiver_armed: pass" in proc.stdout
    assert "D4 idle_active_wake: pass" in proc.stdout
    assert "D1 native_free_continuation: fail" in proc.stdout

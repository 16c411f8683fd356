"""adapters.pi.host with a tiny stand-in for `pi --mode rpc` (a real process, no mocks).

The stand-in answers every command with a response that shows the id it saw, emits the
events it is told to, and can exit on request, so the host's routing, framing, socket
handling and lifetime are checked without installing pi. The pi adapter's own paths that
need pi to misbehave (a rejection, an acknowledged prompt that never lands) use it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.pi.adapter import PiAdapter
from runtime.delivery.contract import DeliveryContext
from tests.conftest import REPO, wait_listening

FAKE_PI = r"""
import json, os, sys

def out(obj):
    sys.stdout.buffer.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")
    sys.stdout.flush()

for raw in sys.stdin.buffer:  # records end at b"\n" only, as in pi
    command = json.loads(raw)
    kind = command.get("type")
    if kind == "exit":
        sys.exit(int(command.get("code", 0)))
    if kind == "emit":
        out(command["event"])
    response = {"type": "response", "command": kind, "success": True}
    if kind == "get_state":
        response["data"] = {"isStreaming": False, "sessionId": "fake"}
    elif kind == "get_messages":
        response["data"] = {"messages": []}
    elif kind == "prompt" and "busy" in command.get("message", ""):
        response = {**response, "success": False, "error": "Agent is already processing."}
    elif kind == "prompt" and "nokey" in command.get("message", ""):
        response = {**response, "success": False, "error": "No API key found for fake.\n\nUse /login"}
    elif kind != "prompt":  # an accepted prompt is dropped: no event follows
        response["data"] = {"seen_id": command.get("id"), "pid": os.getpid(), "echo": command}
    if "id" in command:
        response["id"] = command["id"]
    out(response)
"""


class _Conn:
    """A raw client of the host: lines in, parsed lines out."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.sock.settimeout(10)
        self.buffer = b""

    def send(self, *commands: Any) -> None:
        self.sock.sendall(b"".join(_line(c) for c in commands))

    def read(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("host closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        self.sock.close()


def _line(command: Any) -> bytes:
    return command if isinstance(command, bytes) else json.dumps(command).encode() + b"\n"


def _wait_connectable(path: Path, host: subprocess.Popen[bytes], timeout: float = 20) -> None:
    try:
        wait_listening(path, host, timeout)
    except RuntimeError:
        raise AssertionError(host.communicate()[1].decode()) from None


def _start(socket_path: Path, fake: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapters.pi.host",
            "--socket",
            str(socket_path),
            *extra,
            "--",
            sys.executable,
            str(fake),
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _stop(host: subprocess.Popen[bytes]) -> None:
    if host.poll() is None:
        host.send_signal(signal.SIGTERM)
    try:
        host.wait(timeout=15)
    except subprocess.TimeoutExpired:
        host.kill()
        host.wait()
    if host.stderr is not None:
        host.stderr.close()


@pytest.fixture
def fake_pi(tmp_path: Path) -> Path:
    path = tmp_path / "fake_pi.py"
    path.write_text(FAKE_PI)
    return path


@pytest.fixture
def hosted(tmp_path: Path, fake_pi: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    path = tmp_path / "private" / "pi.sock"
    host = _start(path, fake_pi)
    try:
        _wait_connectable(path, host)
        yield path, host
    finally:
        _stop(host)


def test_socket_is_private(hosted: tuple[Path, subprocess.Popen[bytes]]) -> None:
    path, _ = hosted
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_responses_go_back_to_their_sender_with_its_own_id(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    one, two = _Conn(path), _Conn(path)
    try:
        one.send({"id": "1", "type": "get_thing", "who": "one"})
        two.send({"id": "1", "type": "get_thing", "who": "two"})
        first, second = one.read(), two.read()
        assert (first["id"], first["data"]["echo"]["who"]) == ("1", "one")
        assert (second["id"], second["data"]["echo"]["who"]) == ("1", "two")
        seen = {first["data"]["seen_id"], second["data"]["seen_id"]}
        assert len(seen) == 2 and "1" not in seen, "pi must see host-unique ids"
        one.send({"type": "get_thing", "who": "anonymous"})  # no id: the answer has none
        third = one.read()
        assert "id" not in third and third["data"]["echo"]["who"] == "anonymous"
    finally:
        one.close()
        two.close()


def test_events_reach_every_client_and_are_split_on_newline_only(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    one, two = _Conn(path), _Conn(path)
    try:
        one.send({"id": "sync", "type": "get_state"})
        assert one.read()["id"] == "sync"
        two.send({"id": "sync", "type": "get_state"})  # both are registered for events now
        assert two.read()["id"] == "sync"
        text = "line\u2028separator\u2029paragraph"
        one.send({"id": "e", "type": "emit", "event": {"type": "message_update", "text": text}})
        assert one.read() == {"type": "message_update", "text": text}
        assert one.read()["id"] == "e"
        assert two.read() == {"type": "message_update", "text": text}
    finally:
        one.close()
        two.close()


def test_a_bad_line_is_answered_by_the_host_and_never_reaches_pi(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    conn = _Conn(path)
    try:
        conn.send(b"not json\r\n", b"[1, 2]\n", {"id": "after", "type": "get_thing"})
        assert conn.read()["error"].startswith("Failed to parse command")
        assert "JSON object" in conn.read()["error"]
        after = conn.read()  # pi would have answered a forwarded bad line before this
        assert after["id"] == "after" and after["success"] is True
    finally:
        conn.close()


def test_a_new_client_first_learns_the_last_queue_state(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    queue = {"type": "queue_update", "steering": [], "followUp": ["later dlv-1"]}
    conn = _Conn(path)
    try:
        conn.send({"id": "q", "type": "emit", "event": queue})
        assert conn.read() == queue
        assert conn.read()["id"] == "q"
    finally:
        conn.close()
    late = _Conn(path)
    try:
        assert late.read() == queue
    finally:
        late.close()


def test_a_half_closed_client_still_gets_its_answer(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    conn = _Conn(path)
    try:
        conn.send({"id": "last", "type": "get_thing"})
        conn.sock.shutdown(socket.SHUT_WR)
        assert conn.read()["id"] == "last"
        with pytest.raises(EOFError):
            conn.read()
    finally:
        conn.close()


def test_host_exits_with_pi_and_removes_its_socket(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, host = hosted
    conn = _Conn(path)
    try:
        conn.send({"type": "exit", "code": 3})
        assert host.wait(timeout=15) == 3
    finally:
        conn.close()
    assert not path.exists()


def test_sigterm_stops_pi_and_removes_the_socket(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, host = hosted
    conn = _Conn(path)
    try:
        conn.send({"id": "pid", "type": "get_thing"})
        pi_pid = conn.read()["data"]["pid"]
    finally:
        conn.close()
    host.send_signal(signal.SIGTERM)
    host.wait(timeout=15)
    assert not path.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pi_pid, 0)  # reaped by the host, not merely signalled


def test_a_live_socket_is_refused_and_a_stale_one_replaced(
    hosted: tuple[Path, subprocess.Popen[bytes]], fake_pi: Path, tmp_path: Path
) -> None:
    path, _ = hosted
    second = _start(path, fake_pi)
    try:
        assert second.wait(timeout=15) != 0
        assert second.stderr is not None
        assert b"another host is serving" in second.stderr.read()
    finally:
        _stop(second)
    stale = tmp_path / "stale" / "pi.sock"
    stale.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(stale))  # bound, never listening: a crashed host's leftover
    third = _start(stale, fake_pi)
    try:
        _wait_connectable(stale, third)
    finally:
        _stop(third)


def test_adapter_reports_pis_rejection(hosted: tuple[Path, subprocess.Popen[bytes]]) -> None:
    path, _ = hosted
    adapter = PiAdapter({}, {"socket": str(path)})
    envelope = {"type": "run.done", "summary": "busy"}
    busy = adapter.receive_message(envelope, DeliveryContext(delivery_id="dlv-busy"))
    assert busy.status == "failed" and busy.retryable, busy
    assert busy.reason == "pi rejected the prompt: Agent is already processing."
    nokey = adapter.receive_message(
        {**envelope, "summary": "nokey"}, DeliveryContext(delivery_id="dlv-nokey")
    )
    assert nokey.status == "failed" and not nokey.retryable, nokey
    assert nokey.reason == "pi rejected the prompt: No API key found for fake."


def test_adapter_retries_a_prompt_pi_acknowledged_but_dropped(
    hosted: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    path, _ = hosted
    adapter = PiAdapter({}, {"socket": str(path), "confirm_timeout": "0.2"})
    receipt = adapter.receive_message(
        {"type": "run.done", "summary": "dropped"}, DeliveryContext(delivery_id="dlv-drop")
    )
    assert receipt.status == "failed" and receipt.retryable, receipt
    assert receipt.reason is not None and "dropped" in receipt.reason


def test_host_refuses_a_non_rpc_mode(fake_pi: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "adapters.pi.host",
            "--socket",
            str(tmp_path / "s" / "pi.sock"),
            "--",
            sys.executable,
            str(fake_pi),
            "--mode",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert b"--mode rpc" in done.stderr
    with contextlib.suppress(FileNotFoundError):
        assert not (tmp_path / "s" / "pi.sock").exists()

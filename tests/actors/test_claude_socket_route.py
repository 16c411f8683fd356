"""Which way a Claude Code follow-up goes: the messaging socket by default, the doorbell
where Claude would hold the message (its inbound gate) or the socket is not one of ours.

A real Unix socket listener stands in for the session's socket (the live Claude Code is
driven in tests/peers/test_claude_messaging.py); every case asserts both what reached
the listener and that the follow-up is unread for the doorbell exactly when the socket
was not used: nothing lost, nothing doubled.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli

SESSION = "4f2c9a1e-5b7d-4c3a-9e8f-0a1b2c3d4e5f"


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    path = tmp_path / "cc.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    server.setblocking(False)  # accept() after the submit: what connected is in the backlog
    yield path, server
    server.close()


def _frames(server: socket.socket) -> list[dict[str, object]]:
    """Every line sent on the connections the submit made (none: [])."""
    lines: list[dict[str, object]] = []
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return lines
        with conn:
            conn.setblocking(True)
            conn.settimeout(10)
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        lines += [json.loads(line) for line in data.decode().splitlines()]


def _start(
    home: StateRoot, tmp_path: Path, socket_path: Path, mode: str | None, **settings: str
) -> None:
    """The session as Claude Code's hooks record it: SessionStart with the socket in the
    environment, then a prompt in `mode`; `settings` in the user settings file."""
    config = tmp_path / "claude-config"
    config.mkdir(exist_ok=True)
    (config / "settings.json").write_text(json.dumps(settings))
    env = {"CLAUDE_CONFIG_DIR": str(config), "CLAUDE_CODE_MESSAGING_SOCKET": str(socket_path)}
    data = {"session_id": SESSION, "cwd": str(tmp_path / "project")}
    (tmp_path / "project").mkdir(exist_ok=True)
    assert cli("hook", "session-start", input=json.dumps(data), env=env).returncode == 0
    if mode is not None:
        prompt = {**data, "permission_mode": mode, "prompt": "hello"}
        done = cli("hook", "user-prompt-submit", input=json.dumps(prompt), env=env)
        assert done.returncode == 0, done.stderr


def _submit(home: StateRoot, ident: str, summary: str = "Run x done") -> dict[str, object]:
    envelope = {"type": "run.done", "from": "run:x", "summary": summary}
    state = DeliveryRunner(home).submit(SESSION, envelope, delivery_id=ident)
    return dict(state)


def _unread(home: StateRoot) -> list[str]:
    return [e["id"] for e in SessionInbox(session_paths(home, SESSION)).unread()]


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "auto", "dontAsk"])
def test_a_prompting_session_is_woken_through_the_socket_by_default(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket], mode: str
) -> None:
    path, server = listener
    _start(home, tmp_path, path, mode)
    state = _submit(home, "d-1")
    frames = _frames(server)
    assert [f["type"] for f in frames] == ["user"]
    assert "delivery d-1" in str(frames[0]["message"])
    assert str(state["metadata"]["wake"]).startswith("messaging socket")  # type: ignore[index]
    assert _unread(home) == []  # marked read: the doorbell stays silent for it


@pytest.mark.parametrize(
    ("mode", "settings", "why"),
    [
        ("bypassPermissions", {}, "runs in bypassPermissions"),
        ("plan", {}, "permission mode 'plan' may bypass prompts"),
        (None, {}, "permission mode is not known yet"),
        ("default", {"crossSessionInbound": "hold"}, '"crossSessionInbound": "hold"'),
        ("default", {"crossSessionInbound": "refuse"}, '"crossSessionInbound": "refuse"'),
        ("default", {"crossSessionInbound": "sometimes"}, "unknown"),
        ("x\x1b[2Jevil", {}, "may bypass prompts"),
    ],
)
def test_where_claude_would_hold_it_the_doorbell_rings_instead(
    home: StateRoot,
    tmp_path: Path,
    listener: tuple[Path, socket.socket],
    mode: str | None,
    settings: dict[str, str],
    why: str,
) -> None:
    path, server = listener
    _start(home, tmp_path, path, mode, **settings)
    state = _submit(home, "d-1")
    assert _frames(server) == []  # nothing sent that Claude would hold (and later drop)
    wake = str(state["metadata"]["wake"])  # type: ignore[index]
    assert wake.startswith("doorbell (messaging socket not used: ") and why in wake, wake
    assert "\x1b" not in wake  # a hostile mode name is quoted, never raw
    assert _unread(home) == ["d-1"]  # the doorbell's to deliver
    wake_file = session_paths(home, SESSION).wake
    assert "d-1" in wake_file.read_text()


def test_accept_in_the_settings_lets_a_bypassing_session_be_woken_through_the_socket(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    path, server = listener
    _start(home, tmp_path, path, "bypassPermissions", crossSessionInbound="accept")
    _submit(home, "d-1")
    assert [f["type"] for f in _frames(server)] == ["user"]
    assert _unread(home) == []


def test_a_project_may_only_tighten_the_users_accept(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    path, server = listener
    (tmp_path / "project" / ".claude").mkdir(parents=True)
    (tmp_path / "project" / ".claude" / "settings.local.json").write_text(
        json.dumps({"crossSessionInbound": "hold"})
    )
    _start(home, tmp_path, path, "default", crossSessionInbound="accept")
    _submit(home, "d-1")
    assert _frames(server) == [] and _unread(home) == ["d-1"]


def test_messaging_doorbell_turns_the_socket_off(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    path, server = listener
    _start(home, tmp_path, path, "default")
    record = json.loads(session_paths(home, SESSION).record.read_text())
    record["options"]["messaging"] = "doorbell"
    session_paths(home, SESSION).record.write_text(json.dumps(record))
    state = _submit(home, "d-1")
    assert _frames(server) == [] and _unread(home) == ["d-1"]
    assert state["metadata"]["wake"] == "doorbell (-o messaging=doorbell)"  # type: ignore[index]


def test_a_socket_that_is_gone_or_refuses_leaves_it_to_the_doorbell_once(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    path, server = listener
    _start(home, tmp_path, path, "default")
    server.close()  # Claude exited: the path stays, nobody listens
    refused = _submit(home, "d-1")
    assert "Connection refused" in str(refused["metadata"]["wake"])  # type: ignore[index]
    path.unlink()  # and then the path is gone too
    gone = _submit(home, "d-2")
    assert "No such file" in str(gone["metadata"]["wake"])  # type: ignore[index]
    assert refused["state"] == gone["state"] == "delivered"  # no retry that could double it
    assert _unread(home) == ["d-1", "d-2"]
    ring = cli("hook", "file-changed", input=json.dumps({"session_id": SESSION}))
    assert ring.returncode == 2 and "2 unread follow-up(s)" in ring.stderr


def test_a_socket_path_planted_as_a_symlink_is_not_followed(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    """A path swapped for a symlink to a listening socket (even one of ours): no
    connection through it, no token, the doorbell."""
    real, server = listener
    link = tmp_path / "planted.sock"
    link.symlink_to(real)
    _start(home, tmp_path, link, "default")
    record = json.loads(session_paths(home, SESSION).record.read_text())
    record["options"]["messaging_token"] = "TOKEN-SECRET"
    session_paths(home, SESSION).record.write_text(json.dumps(record))
    state = _submit(home, "d-1")
    assert _frames(server) == []
    assert "symlink" in str(state["metadata"]["wake"])  # type: ignore[index]
    assert _unread(home) == ["d-1"]


def test_a_socket_of_another_user_or_not_a_socket_is_not_used(
    home: StateRoot, tmp_path: Path, listener: tuple[Path, socket.socket]
) -> None:
    path, server = listener
    _start(home, tmp_path, path, "default")
    if os.getuid() == 0:  # root can give the socket file away; the listener stays here
        os.chown(path, 65534, 65534)
        foreign = _submit(home, "d-1")
        assert _frames(server) == []
        assert "belongs to uid 65534" in str(foreign["metadata"]["wake"])  # type: ignore[index]
    path.unlink()
    path.write_text("not a socket")
    plain = _submit(home, "d-2")
    assert "not a socket" in str(plain["metadata"]["wake"])  # type: ignore[index]
    assert _unread(home)[-1] == "d-2"


def test_spawn_inside_the_session_records_its_socket_from_the_environment(
    home: StateRoot, tmp_path: Path
) -> None:
    """A session whose SessionStart saw no socket: `actors spawn` run by that session's
    Claude (its environment names the session) records it; another session's does not."""
    hook = json.dumps({"session_id": SESSION, "cwd": str(tmp_path)})
    assert cli("hook", "session-start", input=hook).returncode == 0
    claude_env = {
        "CLAUDE_CODE_MESSAGING_SOCKET": str(tmp_path / "other.sock"),
        "CLAUDE_CODE_MESSAGING_TOKEN": "tok",
        "CLAUDE_CODE_SESSION_ID": "0b5e55ed-0000-4000-8000-000000000000",
    }
    spawned = cli("spawn", "-t", "true", "--session", SESSION, env=claude_env)
    assert spawned.returncode == 0, spawned.stderr
    options = json.loads(session_paths(home, SESSION).record.read_text())["options"]
    assert "messaging_socket" not in options  # another Claude session's socket
    own = {**claude_env, "CLAUDE_CODE_SESSION_ID": SESSION}
    own["CLAUDE_CODE_MESSAGING_SOCKET"] = str(tmp_path / "own.sock")
    spawned = cli("spawn", "-t", "true", "--session", SESSION, env=own)
    assert spawned.returncode == 0, spawned.stderr
    options = json.loads(session_paths(home, SESSION).record.read_text())["options"]
    assert options["messaging_socket"] == str(tmp_path / "own.sock")
    assert options["messaging_token"] == "tok"

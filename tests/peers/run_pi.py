"""Start a real pi in RPC mode under `adapters.pi.host`, offline, pointed at the fake model.

pi gets throw-away HOME and agent dirs, every network feature off, and one provider
(`fake`, model `echo`) whose baseUrl is the fake LLM on 127.0.0.1. The context manager
yields the host's socket path once the socket accepts connections, and stops the host
(which stops pi) after.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import REPO, wait_listening
from tests.peers.conftest import peer_bin

PI_FLAGS = (
    "--offline",
    "--no-extensions",
    "--no-skills",
    "--no-context-files",
    "--provider",
    "fake",
    "--model",
    "echo",
)


def write_models(agent_dir: Path, llm_port: int) -> Path:
    """pi's models.json with the one fake provider (and a dummy key, which pi requires)."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "fake": {
                "baseUrl": f"http://127.0.0.1:{llm_port}/v1",
                "api": "openai-completions",
                "apiKey": "x",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": "echo"}],
            }
        }
    }
    path = agent_dir / "models.json"
    path.write_text(json.dumps(models))
    return path


def _socket_dir(base: Path) -> Path:
    """A private directory for the socket, short enough for sun_path (107 bytes)."""
    if len(os.fsencode(base / "sock" / "pi.sock")) <= 100:
        return base / "sock"
    return Path(tempfile.mkdtemp(prefix="actors-pi-"))


@contextlib.contextmanager
def run_pi(
    base: Path,
    llm_port: int,
    *,
    models: bool = True,
    timeout: float = 30,
    env: dict[str, str] | None = None,
    pin: str = "",
    args: tuple[str, ...] = (),
) -> Iterator[Path]:
    """Yield the socket of a pi_host running pi offline (no models.json: `models=False`);
    `env` is added to pi's environment (e.g. ACTORS_SESSION for what its shell spawns);
    `pin` names an older pin (tests/peers/conftest.py's peer_bin); `args` go to pi last."""
    pi = peer_bin("pi", pin)
    for name in ("home", "agent", "proj"):
        (base / name).mkdir(parents=True, exist_ok=True)
    if models:
        write_models(base / "agent", llm_port)
    sock_dir = _socket_dir(base)
    path = sock_dir / "pi.sock"
    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    env.update(
        given,
        HOME=str(base / "home"),
        PI_CODING_AGENT_DIR=str(base / "agent"),
        PI_OFFLINE="1",
        PI_SKIP_VERSION_CHECK="1",
        PI_TELEMETRY="0",
    )
    log = open(base / "pi_host.log", "wb")  # noqa: SIM115 - closed in the finally below
    host = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapters.pi.host",
            "--socket",
            str(path),
            "--cwd",
            str(base / "proj"),
            "--",
            str(pi),
            *(PI_FLAGS if models else PI_FLAGS[:4]),  # no provider: pi's default, keyless
            *args,
        ],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        try:
            wait_listening(path, host, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {(base / 'pi_host.log').read_text()}") from None
        with RpcClient(path) as client:  # pi itself answers: it started and parsed its flags
            state = client.request({"type": "get_state"}, timeout=timeout)
            assert state["success"], state
        yield path
    finally:
        stop(host)
        log.close()
        if sock_dir != base / "sock":
            with contextlib.suppress(OSError):
                sock_dir.rmdir()


def stop(host: subprocess.Popen[Any]) -> None:
    """SIGTERM the host (it stops pi's group and removes the socket); SIGKILL if stuck."""
    if host.poll() is None:
        host.send_signal(signal.SIGTERM)
    try:
        host.wait(timeout=15)
    except subprocess.TimeoutExpired:
        host.kill()
        host.wait(timeout=10)


class RpcClient:
    """A test's own connection to pi_host: send commands, wait for pi's events."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self.buffer = b""
        self.events: list[dict[str, Any]] = []
        self.sequence = 0

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _next(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("pi sent nothing more in time")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not data:
                raise ConnectionError("pi_host closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        if message.get("type") != "response":
            self.events.append(message)
        return message

    def request(self, command: dict[str, Any], timeout: float = 15) -> dict[str, Any]:
        self.sequence += 1
        ident = f"test-{self.sequence}"
        self.sock.sendall(json.dumps({**command, "id": ident}).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if message.get("type") == "response" and message.get("id") == ident:
                return message

    def wait_event(
        self, event_type: str, role: str | None = None, containing: str = "", timeout: float = 30
    ) -> int:
        """Index (in `events`) of the first matching event, reading until it arrives."""
        deadline, scanned = time.monotonic() + timeout, 0
        while True:
            for index in range(scanned, len(self.events)):
                event = self.events[index]
                message = event.get("message") or {}
                if (
                    event.get("type") == event_type
                    and (role is None or message.get("role") == role)
                    and containing in json.dumps(message)
                ):
                    return index
            scanned = len(self.events)
            self._next(deadline)

    def messages(self) -> list[dict[str, Any]]:
        return list(self.request({"type": "get_messages"})["data"]["messages"])

    def user_texts(self) -> list[str]:
        return [text_of(m) for m in self.messages() if m.get("role") == "user"]


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


TUI_FLAGS = (
    "--offline",
    "--no-skills",
    "--no-context-files",
    "--provider",
    "fake",
    "--model",
    "echo",
)
"""An interactive pi as a user runs it (extensions load), offline, on the fake model."""


@dataclass
class PiTui:
    """A user's interactive pi in a pane of a tmux server of its own, with the actors pi
    extension and MCP entry `actors install pi --user` wrote."""

    tmux: str
    """The tmux server's socket name (`tmux -L`)."""
    session: str
    """The actors session the extension registered (`pi-<pi's session id>`)."""
    base: Path

    def type(self, text: str) -> None:
        """Type `text` into pi's editor and submit it, as a user would."""
        subprocess.run(["tmux", "-L", self.tmux, "send-keys", "-t", "pi", "-l", text], check=True)
        subprocess.run(["tmux", "-L", self.tmux, "send-keys", "-t", "pi", "Enter"], check=True)


def pi_min_version(major: int) -> None:
    """Skip (or fail under ACTORS_REQUIRE_PEERS=1) unless the pinned pi is at least
    `major`.x: the built-in MCP client and the trust-gated extension API are pi >= 0.99's."""
    from tests.peers.conftest import peer_version

    found = peer_version("pi")
    if int(found.split(".")[0]) < major:
        why = f"pi {found} is installed; this test needs pi >= {major} (run `make peers`)"
        import pytest

        if os.environ.get("ACTORS_REQUIRE_PEERS") == "1":
            pytest.fail(why)
        pytest.skip(why)


def pi_user_env(base: Path, llm_port: int) -> dict[str, str]:
    """The environment of a user's pi 1.x (throw-away HOME and agent dir under `base`,
    offline, the fake model), after the real `actors install pi --user` ran in it."""
    from tests.peers.conftest import actors_install

    pi_min_version(1)
    for name in ("home", "agent", "proj"):
        (base / name).mkdir(parents=True, exist_ok=True)
    write_models(base / "agent", llm_port)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "TMUX"))}
    env.update(
        HOME=str(base / "home"),
        PI_CODING_AGENT_DIR=str(base / "agent"),
        PI_OFFLINE="1",
        PI_SKIP_VERSION_CHECK="1",
        PI_TELEMETRY="0",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    actors_install("pi", env, base / "proj")
    return env


@contextlib.contextmanager
def pi_tui(base: Path, llm_port: int, timeout: float = 60) -> Iterator[PiTui]:
    """Yield an interactive pi 1.x in tmux, configured by the real `actors install pi
    --user` into its throw-away agent dir, once its extension registered its session."""
    from runtime.store.layout import StateRoot
    from tests.conftest import wait_for_change

    pi = peer_bin("pi")
    env = pi_user_env(base, llm_port)
    root = StateRoot.from_env()
    before = set(_pi_sessions(root))
    tmux = f"actors-pi-{os.getpid()}-{id(base) & 0xFFFF:x}"
    # a tmux server of its own, started with `env`: its panes get exactly that environment
    tmux_args = ["-f", "/dev/null", "new-session", "-d", "-s", "pi", "-x", "160", "-y", "50"]
    subprocess.run(
        ["tmux", "-L", tmux, *tmux_args, "-c", str(base / "proj"), str(pi), *TUI_FLAGS],
        check=True,
        env=env,
    )
    try:
        root.path.mkdir(parents=True, exist_ok=True)
        found: list[str] = []

        def registered() -> bool:
            found[:] = [s for s in _pi_sessions(root) if s not in before]
            return bool(found)

        wait_for_change(root.path, registered, timeout, "the pi extension registered a session")
        yield PiTui(tmux, found[0], base)
    finally:
        subprocess.run(["tmux", "-L", tmux, "kill-server"], check=False, capture_output=True)


def _pi_sessions(root: Any) -> list[str]:
    """The actors sessions pi's extension registered (their records are written)."""
    directory = root.path / "sessions"
    if not directory.is_dir():
        return []
    return [
        p.name
        for p in directory.iterdir()
        if (p / "session.json").exists() and p.name.startswith("pi-")
    ]

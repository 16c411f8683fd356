"""Start a real `codex app-server` offline on a Unix socket, pointed at the fake model."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import wait_listening
from tests.peers.conftest import actors_install, peer_bin

CONFIG = """\
model = "echo"
model_provider = "fake"
check_for_update_on_startup = false
[model_providers.fake]
name = "fake loopback"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
[features]
plugins = false
remote_plugin = false
apps = false
plugin_sharing = false
unbounded_connection_retries = false
in_app_updates = false
"""


@dataclass
class Codex:
    socket: Path
    home: Path
    project: Path
    process: subprocess.Popen[bytes]
    pin: str = ""


def start(base: Path, llm_port: int, *, install: bool = False, pin: str = "") -> Codex:
    """Start the app-server; with `install`, after the real `actors install codex --user`
    added our MCP server to its config (as a user would, before starting Codex); `pin`
    names an older pin (tests/peers/conftest.py's peer_bin)."""
    home, project, sockets = base / "home", base / "proj", base / "sock"
    for directory in (home, project, sockets):
        directory.mkdir(parents=True, exist_ok=True)
    sockets.chmod(0o700)
    (home / "config.toml").write_text(CONFIG.format(port=llm_port))
    path = sockets / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "OPENAI_"))}
    env.update(CODEX_HOME=str(home), HOME=str(base), RUST_LOG="warn")
    if install:
        actors_install("codex", env, project)
        if env.get("PYTHONPATH"):  # a checkout under test, not the installed package:
            # Codex passes an MCP server only the variables `env_vars` names
            config = home / "config.toml"
            text = config.read_text().replace("env_vars = [", 'env_vars = ["PYTHONPATH", ', 1)
            config.write_text(text)
    process = subprocess.Popen(
        [str(peer_bin("codex", pin)), "app-server", "--listen", f"unix://{path}"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_listening(path, process, 30)  # the app-server's own readiness: the socket accepts
    except (RuntimeError, TimeoutError):
        stop(process)
        raise
    return Codex(path, home, project, process, pin)


def stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def codex_server(
    base: Path, llm_port: int, *, install: bool = False, pin: str = ""
) -> Iterator[Codex]:
    server = start(base, llm_port, install=install, pin=pin)
    try:
        yield server
    finally:
        stop(server.process)

"""Start a real `opencode serve` offline, pointed at the fake model, in throw-away dirs.

Kilo Code's CLI (`kilo serve`, a fork of OpenCode) keeps the same server, API and plugin
surface under its own names: the executable `kilo`, `KILO_*` for every `OPENCODE_*`
variable and `~/.config/kilo/`; `KILO` below starts it the same way (peers/more/).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.peers.conftest import actors_install, peer_bin

_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


@dataclass(frozen=True)
class Flavour:
    """Which OpenCode: its executable (and the pin dir that holds it), the prefix of its
    environment variables, its directory under XDG_CONFIG_HOME (also the `actors install`
    harness name), its server's default HTTP Basic user and the plugin package it installs
    into its config directory when a plugin is present."""

    bin: str
    env: str
    config_dir: str
    username: str
    plugin_package: str
    pin: str = ""


OPENCODE = Flavour("opencode", "OPENCODE", "opencode", "opencode", "@opencode-ai/plugin")
KILO = Flavour("kilo", "KILO", "kilo", "kilo", "@kilocode/plugin", pin="more")


@dataclass
class OpenCode:
    url: str
    password: str
    process: subprocess.Popen[str]
    base: Path
    username: str = "opencode"

    def client(self, password: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, auth=(self.username, password or self.password), timeout=15.0
        )

    def new_session(self) -> str:
        with self.client() as client:
            created = client.post("/session", json={"title": "actors peer test"})
            created.raise_for_status()
            return str(created.json()["id"])

    def user_texts(self, session: str) -> list[str]:
        """The text of every user message the session stored, in order."""
        with self.client() as client:
            messages = client.get(f"/session/{session}/message").json()
        return [
            "".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text")
            for m in messages
            if m["info"]["role"] == "user"
        ]


_DISABLED = (
    "DISABLE_AUTOUPDATE",
    "DISABLE_MODELS_FETCH",
    "DISABLE_LSP_DOWNLOAD",
    "DISABLE_SHARE",
    "DISABLE_DEFAULT_PLUGINS",
    "DISABLE_CLAUDE_CODE",
    "DISABLE_EXTERNAL_SKILLS",
)
"""The `<PREFIX>_` switches that keep the server off the network and out of ~/.claude."""


def _env(base: Path, llm_port: int, password: str, flavour: Flavour = OPENCODE) -> dict[str, str]:
    config = {
        "enabled_providers": ["fake"],
        "model": "fake/echo",
        "small_model": "fake/echo",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": f"http://127.0.0.1:{llm_port}/v1", "apiKey": "x"},
                "models": {"echo": {"name": "Echo"}},
            }
        },
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "KILO", "XDG_"))}
    for name in ("home", "config", "data", "state", "cache", "proj"):
        (base / name).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(base / "home"),
        XDG_CONFIG_HOME=str(base / "config"),
        XDG_DATA_HOME=str(base / "data"),
        XDG_STATE_HOME=str(base / "state"),
        XDG_CACHE_HOME=str(base / "cache"),
        # its background plugin install must not leave loopback: a closed local port
        NPM_CONFIG_REGISTRY="http://127.0.0.1:9/",
        BUN_CONFIG_REGISTRY="http://127.0.0.1:9/",
    )
    for name in _DISABLED:
        env[f"{flavour.env}_{name}"] = "1"
    env[f"{flavour.env}_SERVER_PASSWORD"] = password
    env[f"{flavour.env}_CONFIG_CONTENT"] = json.dumps(config)
    return env


def install_actors(env: dict[str, str], cwd: Path, flavour: Flavour = OPENCODE) -> None:
    """The real `actors install opencode --user` (`kilo` for Kilo) into the throw-away
    XDG config."""
    actors_install(flavour.config_dir, env, cwd)
    # Offline only: with a plugin present OpenCode waits for its background `npm install
    # @opencode-ai/plugin` into the config dir (our plugin imports nothing), which never
    # ends without a registry; a lock file that lists it makes OpenCode skip the install.
    config = Path(env["XDG_CONFIG_HOME"]) / flavour.config_dir
    (config / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"packages": {"": {"dependencies": {flavour.plugin_package: "*"}}}}
    (config / "package-lock.json").write_text(json.dumps(lock))


def start(
    base: Path,
    llm_port: int,
    password: str = "secret",
    port: int = 0,
    *,
    install: bool = False,
    flavour: Flavour = OPENCODE,
) -> OpenCode:
    """Start the server and wait for its 'listening on' line (its own readiness signal).
    With `install`, the real `actors install opencode --user` runs first and the server
    loads plugins (no `--pure`), as a user's would."""
    executable = peer_bin(flavour.bin, flavour.pin)
    env = _env(base, llm_port, password, flavour)
    if install:
        install_actors(env, base / "proj", flavour)
    process = subprocess.Popen(
        [
            str(executable),
            "serve",
            "--port",
            str(port),
            "--hostname",
            "127.0.0.1",
            *([] if install else ["--pure"]),
        ],
        cwd=base / "proj" if (base / "proj").exists() else None,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        found = _LISTENING.search(line)
        if found:
            # keep draining its stdout so a chatty server never blocks on a full pipe
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return OpenCode(found.group(1), password, process, base, flavour.username)
    stop_process(process)
    raise RuntimeError(f"{flavour.bin} serve exited before listening")


def stop_process(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@contextlib.contextmanager
def opencode_server(
    base: Path,
    llm_port: int,
    password: str = "secret",
    *,
    install: bool = False,
    flavour: Flavour = OPENCODE,
) -> Iterator[OpenCode]:
    for name in ("home", "config", "data", "state", "cache", "proj"):
        (base / name).mkdir(parents=True, exist_ok=True)
    server = start(base, llm_port, password, install=install, flavour=flavour)
    try:
        yield server
    finally:
        stop_process(server.process)

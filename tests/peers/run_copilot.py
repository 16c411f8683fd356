"""Run the real GitHub Copilot CLI one-shot (`copilot -p`), offline, at the fake model.

Copilot's own offline mode: COPILOT_OFFLINE=true skips GitHub authentication,
telemetry, web tools, the GitHub MCP server and auto-update, and needs a model provider
of one's own (BYOK): COPILOT_PROVIDER_BASE_URL (OpenAI Chat Completions by default),
COPILOT_PROVIDER_API_KEY, COPILOT_MODEL. A throw-away HOME holds a recorder agentStop
hook (`~/.copilot/hooks/recorder.json`) that appends every agentStop input to a file, and
the real `actors install copilot --user` writes `~/.copilot/hooks/actors.json` with
`actors hook copilot-agent-stop`, as the docs tell a user to.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers.conftest import MORE, actors_install, peer_bin

MODEL = "gpt-4.1"

_RECORDER = (
    "import sys; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data.strip() + chr(10))"
)


@dataclass
class Copilot:
    """A Copilot CLI setup: its HOME, project dir and where agentStop inputs are kept."""

    base: Path
    llm_port: int
    actors_home: Path
    session: str

    @property
    def stop_log(self) -> Path:
        return self.base / "agent-stop.jsonl"

    def stop_inputs(self) -> list[dict[str, Any]]:
        if not self.stop_log.exists():
            return []
        return [json.loads(line) for line in self.stop_log.read_text().splitlines()]

    def setup(self) -> Copilot:
        peer_bin("copilot", MORE)  # skip (or fail under ACTORS_REQUIRE_PEERS) before any work
        hooks_dir, proj = self.base / "home" / ".copilot" / "hooks", self.base / "proj"
        hooks_dir.mkdir(parents=True, exist_ok=True)
        proj.mkdir(parents=True, exist_ok=True)
        python = shlex.quote(sys.executable)
        recorder = f"{python} -c {shlex.quote(_RECORDER)} {shlex.quote(str(self.stop_log))}"
        hooks = {
            "version": 1,
            "hooks": {"agentStop": [{"type": "command", "bash": recorder}]},
        }
        (hooks_dir / "recorder.json").write_text(json.dumps(hooks, indent=2))
        actors_install("copilot", self.env(), proj)
        return self

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("COPILOT_", "GH_", "GITHUB_", "OPENAI_"))
        }
        env.update(
            HOME=str(self.base / "home"),
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=f"http://127.0.0.1:{self.llm_port}/v1",
            COPILOT_PROVIDER_API_KEY="dummy-offline-key",
            COPILOT_MODEL=MODEL,
            COPILOT_AUTO_UPDATE="false",
            ACTORS_HOME=str(self.actors_home),
            ACTORS_SESSION=self.session,
            NO_COLOR="1",
        )
        return env

    def run(self, prompt: str, timeout: float = 120) -> str:
        """One headless turn (`copilot -p PROMPT -s`) in a new session; what it printed
        (the agent's responses only)."""
        copilot = peer_bin("copilot", MORE)
        done = subprocess.run(
            [str(copilot), "-p", prompt, "-s", "--allow-all-tools", "--disable-client-telemetry"],
            cwd=self.base / "proj",
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return done.stdout

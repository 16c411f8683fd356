"""Run the real Gemini CLI one-shot (`gemini -p`), offline, pointed at the fake model.

Gemini gets a throw-away HOME whose `~/.gemini/settings.json` turns auto-update, update
notifications, usage statistics and telemetry off, selects API-key auth (a dummy
`GEMINI_API_KEY`; `GOOGLE_GEMINI_BASE_URL` alone would select the "gateway" auth, which
the headless mode rejects) and installs `actors hook gemini-after-agent` as the
AfterAgent hook, plus a recorder hook that appends every AfterAgent input to a file. The
model is given with `-m` so Gemini skips its routing classifier (a JSON-only side request
the fake model does not answer); every model request is then a turn of the agent.
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

from tests.peers.conftest import peer_bin

MODEL = "gemini-2.5-flash"

_RECORDER = (
    "import sys; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data.strip() + chr(10))"
)


@dataclass
class Gemini:
    """A Gemini CLI setup: its HOME, project dir and where AfterAgent inputs are kept."""

    base: Path
    llm_port: int
    actors_home: Path
    session: str
    mcp: bool = False
    """Also configure `actors mcp` as the MCP server `actors` (docs/harnesses.md), trusted
    so headless `gemini -p` runs its tools without a confirmation prompt."""

    @property
    def after_agent_log(self) -> Path:
        return self.base / "after-agent.jsonl"

    def after_agent_inputs(self) -> list[dict[str, Any]]:
        if not self.after_agent_log.exists():
            return []
        return [json.loads(line) for line in self.after_agent_log.read_text().splitlines()]

    def setup(self) -> Gemini:
        home, proj = self.base / "home", self.base / "proj"
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        proj.mkdir(parents=True, exist_ok=True)
        python = shlex.quote(sys.executable)
        recorder = f"{python} -c {shlex.quote(_RECORDER)} {shlex.quote(str(self.after_agent_log))}"
        settings: dict[str, Any] = {
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "hooks": {
                "AfterAgent": [
                    {"hooks": [{"type": "command", "command": recorder}]},
                    {
                        "hooks": [
                            {
                                "type": "command",
                                "command": f"{python} -m actors hook gemini-after-agent",
                            }
                        ]
                    },
                ]
            },
        }
        if self.mcp:
            settings["mcpServers"] = {
                "actors": {
                    "command": sys.executable,
                    "args": ["-m", "actors", "mcp"],
                    "trust": True,
                }
            }
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))
        return self

    def run(
        self, prompt: str, timeout: float = 120, resume: bool = False, extra: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """One headless turn (`gemini -p PROMPT --output-format json`); its JSON result.
        `resume` continues the latest session of the project (`--resume latest`); `extra`
        are more flags (e.g. `--approval-mode yolo` for Gemini's own shell and edit tools)."""
        gemini = peer_bin("gemini")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GEMINI_", "GOOGLE_", "CLOUD_SHELL"))
        }
        env.update(
            HOME=str(self.base / "home"),
            GEMINI_API_KEY="dummy-offline-key",
            GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{self.llm_port}",
            GEMINI_CLI_TRUST_WORKSPACE="true",
            GEMINI_TELEMETRY_ENABLED="false",
            ACTORS_HOME=str(self.actors_home),
            ACTORS_SESSION=self.session,
            NO_COLOR="1",
        )
        done = subprocess.run(
            [
                str(gemini),
                "-m",
                MODEL,
                *(["--resume", "latest"] if resume else []),
                *extra,
                "-p",
                prompt,
                "--output-format",
                "json",
            ],
            cwd=self.base / "proj",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        result: dict[str, Any] = json.loads(done.stdout)
        return result

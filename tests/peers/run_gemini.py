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
import shlex
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from tests.peers.conftest import peer_bin
from tests.peers.hooked import HookedHarness

MODEL = "gemini-2.5-flash"


@dataclass
class Gemini(HookedHarness):
    """A Gemini CLI setup; its recorder keeps the AfterAgent hook's inputs."""

    HOOK_LOG: ClassVar[str] = "after-agent.jsonl"
    OWN_VARIABLES: ClassVar[tuple[str, ...]] = ("GEMINI_", "GOOGLE_", "CLOUD_SHELL")

    mcp: bool = False
    """Also configure `actors mcp` as the MCP server `actors` (docs/harnesses.md), trusted
    so headless `gemini -p` runs its tools without a confirmation prompt."""

    def setup(self) -> Gemini:
        python = shlex.quote(sys.executable)
        ours = {"type": "command", "command": f"{python} -m actors hook gemini-after-agent"}
        settings: dict[str, Any] = {
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "hooks": {
                "AfterAgent": [
                    {"hooks": [{"type": "command", "command": self.recorder()}]},
                    {"hooks": [ours]},
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
        (self.make_dirs(".gemini") / "settings.json").write_text(json.dumps(settings, indent=2))
        return self

    def env(self) -> dict[str, str]:
        return self.harness_env(
            GEMINI_API_KEY="dummy-offline-key",
            GOOGLE_GEMINI_BASE_URL=f"http://127.0.0.1:{self.llm_port}",
            GEMINI_CLI_TRUST_WORKSPACE="true",
            GEMINI_TELEMETRY_ENABLED="false",
        )

    def run(
        self, prompt: str, timeout: float = 120, resume: bool = False, extra: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """One headless turn (`gemini -p PROMPT --output-format json`); its JSON result.
        `resume` continues the latest session of the project (`--resume latest`); `extra`
        are more flags (e.g. `--approval-mode yolo` for Gemini's own shell and edit tools)."""
        gemini = str(peer_bin("gemini"))
        again = ["--resume", "latest"] if resume else []
        argv = [gemini, "-m", MODEL, *again, *extra, "-p", prompt, "--output-format", "json"]
        result: dict[str, Any] = json.loads(self.turn(argv, timeout))
        return result

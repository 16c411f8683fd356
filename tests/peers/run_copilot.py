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
from typing import ClassVar

from tests.peers.conftest import MORE, actors_install, peer_bin
from tests.peers.hooked import HookedHarness

MODEL = "gpt-4.1"


class Copilot(HookedHarness):
    """A Copilot CLI setup; its recorder keeps the agentStop hook's inputs."""

    HOOK_LOG: ClassVar[str] = "agent-stop.jsonl"
    OWN_VARIABLES: ClassVar[tuple[str, ...]] = ("COPILOT_", "GH_", "GITHUB_", "OPENAI_")

    def setup(self) -> Copilot:
        peer_bin("copilot", MORE)  # skip (or fail under ACTORS_REQUIRE_PEERS) before any work
        hooks = {
            "version": 1,
            "hooks": {"agentStop": [{"type": "command", "bash": self.recorder()}]},
        }
        hooks_dir = self.make_dirs(".copilot/hooks")
        (hooks_dir / "recorder.json").write_text(json.dumps(hooks, indent=2))
        actors_install("copilot", self.env(), self.proj)
        return self

    def env(self) -> dict[str, str]:
        return self.harness_env(
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=f"http://127.0.0.1:{self.llm_port}/v1",
            COPILOT_PROVIDER_API_KEY="dummy-offline-key",
            COPILOT_MODEL=MODEL,
            COPILOT_AUTO_UPDATE="false",
        )

    def run(self, prompt: str, timeout: float = 120, resume: bool = False) -> str:
        """One headless turn (`copilot -p PROMPT -s`), in a new session or, with `resume`,
        the most recent one (`--continue`); what it printed (the agent's responses only)."""
        copilot = str(peer_bin("copilot", MORE))
        again = ["--continue"] if resume else []
        flags = ["-s", "--allow-all-tools", "--disable-client-telemetry"]
        return self.turn([copilot, *again, "-p", prompt, *flags], timeout)

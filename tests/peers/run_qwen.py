"""Run the real Qwen Code one-shot (`qwen -p`), offline, pointed at the fake model.

Qwen Code (a Gemini CLI fork) gets a throw-away HOME whose `~/.qwen/settings.json`
selects its OpenAI-compatible provider (`security.auth.selectedType: "openai"`; the key,
base URL and model come from OPENAI_API_KEY / OPENAI_BASE_URL / OPENAI_MODEL), turns
auto-update, usage statistics, telemetry and the background memory extractor (a side
request to the model after every turn) off and holds a recorder Stop hook that appends
every Stop input to a file; then the real `actors install qwen-code --user` adds
`actors hook qwen-stop` after it, as the docs tell a user to.
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

MODEL = "echo"

_RECORDER = (
    "import sys; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data.strip() + chr(10))"
)


@dataclass
class Qwen:
    """A Qwen Code setup: its HOME, project dir and where Stop inputs are kept."""

    base: Path
    llm_port: int
    actors_home: Path
    session: str

    @property
    def stop_log(self) -> Path:
        return self.base / "stop.jsonl"

    def stop_inputs(self) -> list[dict[str, Any]]:
        if not self.stop_log.exists():
            return []
        return [json.loads(line) for line in self.stop_log.read_text().splitlines()]

    def setup(self) -> Qwen:
        home, proj = self.base / "home", self.base / "proj"
        (home / ".qwen").mkdir(parents=True, exist_ok=True)
        proj.mkdir(parents=True, exist_ok=True)
        python = shlex.quote(sys.executable)
        recorder = f"{python} -c {shlex.quote(_RECORDER)} {shlex.quote(str(self.stop_log))}"
        settings: dict[str, Any] = {
            "general": {"enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "security": {"auth": {"selectedType": "openai"}},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": recorder}]}]},
        }
        (home / ".qwen" / "settings.json").write_text(json.dumps(settings, indent=2))
        actors_install("qwen-code", self.env(), proj)
        return self

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "QWEN_", "DASHSCOPE_", "GEMINI_", "GOOGLE_"))
        }
        env.update(
            HOME=str(self.base / "home"),
            OPENAI_API_KEY="dummy-offline-key",
            OPENAI_BASE_URL=f"http://127.0.0.1:{self.llm_port}/v1",
            OPENAI_MODEL=MODEL,
            ACTORS_HOME=str(self.actors_home),
            ACTORS_SESSION=self.session,
            NO_COLOR="1",
        )
        return env

    def run(self, prompt: str, timeout: float = 120) -> dict[str, Any]:
        """One headless turn (`qwen -p PROMPT -o json`) in a new session; its final
        `result` record."""
        qwen = peer_bin("qwen", MORE)
        done = subprocess.run(
            [str(qwen), "-p", prompt, "-o", "json"],
            cwd=self.base / "proj",
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        records = json.loads(done.stdout)
        (result,) = [r for r in records if r.get("type") == "result"]
        return dict(result)

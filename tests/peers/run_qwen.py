"""Run the real Qwen Code one-shot (`qwen -p`), offline, pointed at the fake model.

Qwen Code (a Gemini CLI fork) gets a throw-away HOME whose `~/.qwen/settings.json`
selects its OpenAI-compatible provider (`security.auth.selectedType: "openai"`; the key,
base URL and model come from OPENAI_API_KEY / OPENAI_BASE_URL / OPENAI_MODEL), turns
auto-update, usage statistics, telemetry and the background memory extractor (a side
request to the model after every turn) off and holds a recorder Stop hook that appends
every Stop input to a file; then the real `actors install qwen-code --user` adds
`actors hook qwen-stop` after it, as the docs tell a user to. `qwen_tui` starts the
interactive Qwen Code instead, in tmux, with `--input-file` (the `qwen_code` adapter's
way in) and `--json-file` (its confirmation).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tests.conftest import wait_for_change
from tests.peers.conftest import MORE, actors_install, peer_bin
from tests.peers.hooked import HookedHarness

MODEL = "echo"


class Qwen(HookedHarness):
    """A Qwen Code setup; its recorder keeps the Stop hook's inputs."""

    HOOK_LOG: ClassVar[str] = "stop.jsonl"
    OWN_VARIABLES: ClassVar[tuple[str, ...]] = (
        "OPENAI_", "QWEN_", "DASHSCOPE_", "GEMINI_", "GOOGLE_",
    )  # fmt: skip

    def setup(self) -> Qwen:
        peer_bin("qwen", MORE)  # skip (or fail under ACTORS_REQUIRE_PEERS) before any work
        settings: dict[str, Any] = {
            "general": {"enableAutoUpdate": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "security": {"auth": {"selectedType": "openai"}},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": self.recorder()}]}]},
        }
        (self.make_dirs(".qwen") / "settings.json").write_text(json.dumps(settings, indent=2))
        actors_install("qwen-code", self.env(), self.proj)
        return self

    def env(self) -> dict[str, str]:
        return self.harness_env(
            OPENAI_API_KEY="dummy-offline-key",
            OPENAI_BASE_URL=f"http://127.0.0.1:{self.llm_port}/v1",
            OPENAI_MODEL=MODEL,
        )

    def run(
        self, prompt: str, timeout: float = 120, resume: bool = False, extra: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """One headless turn (`qwen -p PROMPT -o json`), in a new session or, with
        `resume`, the project's latest (`--continue`); its final `result` record. `extra`
        are more flags (e.g. `--allowed-tools` for the tools Qwen may run unasked)."""
        again = ["--continue"] if resume else []
        argv = [str(peer_bin("qwen", MORE)), *again, *extra, "-p", prompt, "-o", "json"]
        out = self.turn(argv, timeout)
        (result,) = [r for r in json.loads(out) if r.get("type") == "result"]
        return dict(result)


@contextlib.contextmanager
def qwen_tui(qwen: Qwen) -> Iterator[QwenTui]:
    """The interactive Qwen Code (its TUI, in a tmux pane on a private server) started
    with `--input-file` and `--json-file`, as a user would start it for actors to wake;
    yields once Qwen wrote its `session_start` event. The tmux server is killed after."""
    tui = QwenTui(
        input_file=qwen.base / "input.jsonl",
        events_file=qwen.base / "events.jsonl",
        tmux_socket=f"actors-qwen-{os.getpid()}-{id(qwen)}",
    )
    env = {**qwen.env(), "TERM": "xterm-256color"}
    command = shlex.join(
        [
            "env",
            *[f"{k}={v}" for k, v in env.items()],
            str(peer_bin("qwen", MORE)),
            "--input-file",
            str(tui.input_file),
            "--json-file",
            str(tui.events_file),
        ]
    )
    subprocess.run(
        ["tmux", "-L", tui.tmux_socket, "new-session", "-d", "-s", "qwen", "-x", "120",
         "-y", "40", "-c", str(qwen.proj), command],
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("TMUX")},
    )  # fmt: skip
    try:
        try:  # woken by each write to the events file (inotify), not by a timer
            wait_for_change(
                tui.events_file.parent,
                lambda: b'"session_start"' in _read(tui.events_file),
                timeout=60,
                what="qwen's session_start event",
            )
        except TimeoutError:
            raise TimeoutError(f"qwen never started: {tui.screen()}") from None
        yield tui
    finally:
        subprocess.run(["tmux", "-L", tui.tmux_socket, "kill-server"], check=False)


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


@dataclass
class QwenTui:
    input_file: Path
    events_file: Path
    tmux_socket: str

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.tmux_socket, "capture-pane", "-p", "-t", "qwen"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def options(self) -> dict[str, str]:
        """The `-o` options of a `qwen_code` session for this Qwen (generous waits: a
        fresh TUI takes seconds before it polls its input file)."""
        return {
            "input_file": str(self.input_file),
            "events_file": str(self.events_file),
            "confirm_timeout": "30",
            "processed_timeout": "30",
        }

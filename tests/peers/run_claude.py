"""Drive the real Claude Code (`claude -p` with stream-json in and out) for the peers tier.

`claude_session(...)` prepares throw-away `CLAUDE_CONFIG_DIR` and `HOME` directories, runs
the real `actors install claude-code --user` into them (so the hooks and MCP entry under
test are exactly what the project writes), then starts

    claude -p --input-format stream-json --output-format stream-json --verbose \
        --model claude-sonnet-4-5

with stdin kept open, every network feature off and the model provider pointed at the
fake LLM on 127.0.0.1. A reader thread parses each stdout line into `events`; tests wait
on them with `wait_for(predicate, timeout)`. Leaving the context closes stdin, then
terminates and kills the whole process group (claude, its hooks, the MCP server).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.peers.conftest import actors_install

MODEL = "claude-sonnet-4-5"
VENV_BIN = Path(sys.executable).parent
DOORBELL_ONLY = {"crossSessionInbound": "refuse"}
"""Claude settings that keep follow-ups off the messaging socket (the session refuses
messages from other senders), so they ring the FileChanged doorbell: the tests of the
doorbell itself. The socket, the default, is tests/peers/test_claude_messaging.py's."""
Event = dict[str, Any]
Predicate = Callable[[Event], bool]


def claude_env(config_dir: Path, home_dir: Path, llm_port: int, state_root: Path) -> dict[str, str]:
    """The environment for claude and for `actors install`: loopback only, temp dirs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE", "ACTORS_SESSION", "ACTORS_RUN"))
    }
    env.update(
        HOME=str(home_dir),
        CLAUDE_CONFIG_DIR=str(config_dir),
        ACTORS_HOME=str(state_root),
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")]),
        ANTHROPIC_API_KEY="sk-ant-dummy-offline-peers-tier",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{llm_port}",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_MAX_RETRIES="0",
        NO_PROXY="127.0.0.1,localhost",
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(name, None)
    return env


def install_actors(env: dict[str, str], cwd: Path, *args: str) -> str:
    """The real `actors install claude-code --user [ARGS]` into the temp config dir."""
    return actors_install("claude-code", env, cwd, *args)


@dataclass
class ClaudeSession:
    """A running `claude -p` in stream-json mode; every stdout line parsed in `events`."""

    proc: subprocess.Popen[bytes]
    config_dir: Path
    cwd: Path
    stderr_path: Path
    events: list[Event] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)
    raw_noise: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _eof: bool = False

    def start_reader(self) -> None:
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                line = raw.decode("utf-8", "replace").strip()
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    event = None
                with self._cond:
                    if isinstance(event, dict):
                        self.events.append(event)
                        self.received_at.append(time.time())
                    else:
                        self.raw_noise.append(line)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    # -- input -----------------------------------------------------------------------
    def send_user(self, text: str) -> None:
        """One user turn, as a stream-json input line."""
        line = {"type": "user", "message": {"role": "user", "content": text}}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        self.proc.stdin.flush()

    # -- output ----------------------------------------------------------------------
    def mark(self) -> int:
        """The index the next event will have (pass as `after` to wait past it)."""
        with self._cond:
            return len(self.events)

    def wait_for(self, predicate: Predicate, timeout: float = 60, after: int = 0) -> Event:
        """The first event at index >= `after` matching `predicate`; raises on timeout or
        when claude's stdout ends first."""
        deadline = time.monotonic() + timeout
        index = after
        with self._cond:
            while True:
                while index < len(self.events):
                    event = self.events[index]
                    index += 1
                    if predicate(event):
                        return event
                if self._eof:
                    raise AssertionError(
                        f"claude exited (code {self.proc.poll()}) before the awaited event;"
                        f" stderr: {self.stderr_tail()}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no matching claude event within {timeout}s; last events: "
                        f"{[_brief(e) for e in self.events[-8:]]}"
                    )
                self._cond.wait(remaining)

    def next_result(self, timeout: float = 60, after: int = 0) -> Event:
        return self.wait_for(lambda e: e.get("type") == "result", timeout, after)

    def results(self) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.get("type") == "result"]

    def hook_responses(self, hook_event: str, after: int = 0) -> list[Event]:
        """The `hook_response` events of one hook event (needs `--include-hook-events`
        for events other than SessionStart)."""
        with self._cond:
            return [
                e
                for e in self.events[after:]
                if e.get("subtype") == "hook_response" and e.get("hook_event") == hook_event
            ]

    def init_event(self, timeout: float = 60) -> Event:
        return self.wait_for(
            lambda e: e.get("type") == "system" and e.get("subtype") == "init", timeout
        )

    @property
    def session_id(self) -> str:
        return str(self.init_event()["session_id"])

    def stderr_tail(self, chars: int = 2000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- shutdown --------------------------------------------------------------------
    def close(self, grace: float = 5.0) -> None:
        """Close stdin (claude ends by itself once idle), then TERM and KILL the group."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # Hooks and the MCP server live in the same process group: end them all.
        _signal_group(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _brief(event: Event) -> str:
    kind = str(event.get("type"))
    if event.get("subtype"):
        kind += f"/{event['subtype']}"
    if event.get("hook_event"):
        kind += f"/{event['hook_event']}"
    return kind


@contextlib.contextmanager
def claude_session(
    claude: Path,
    llm_port: int,
    state_root: Path,
    workdir: Path,
    *,
    hook_events: bool = True,
    extra_args: tuple[str, ...] = (),
    extra_env: dict[str, str] | None = None,
    install_args: tuple[str, ...] = (),
    settings: dict[str, Any] | None = None,
) -> Iterator[ClaudeSession]:
    """Install actors into a fresh Claude config, start claude, yield; always kill it.

    `hook_events` adds `--include-hook-events`, which only adds `hook_response` events to
    the output (with each FileChanged hook's exit code and stderr); it changes nothing
    that the hooks or the model see. `extra_env` goes to claude and to the install,
    `install_args` to `actors install claude-code --user`, `settings` into the user
    settings.json it wrote (`{"crossSessionInbound": "refuse"}`: the doorbell path, for
    the tests of the doorbell itself)."""
    base = workdir / "claude-peer"
    config_dir, home_dir, cwd = base / "config", base / "home", base / "project"
    for directory in (config_dir, home_dir, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    env = {**claude_env(config_dir, home_dir, llm_port, state_root), **(extra_env or {})}
    install_actors(env, cwd, *install_args)
    if settings:
        written = config_dir / "settings.json"
        written.write_text(json.dumps({**json.loads(written.read_text()), **settings}))
    stderr_path = base / "claude.stderr"
    command = [
        str(claude),
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        MODEL,
        *(["--include-hook-events"] if hook_events else []),
        *extra_args,
    ]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    session = ClaudeSession(proc=proc, config_dir=config_dir, cwd=cwd, stderr_path=stderr_path)
    try:
        session.start_reader()
        yield session
    finally:
        session.close()


__all__ = [
    "DOORBELL_ONLY",
    "MODEL",
    "ClaudeSession",
    "claude_env",
    "claude_session",
    "install_actors",
]

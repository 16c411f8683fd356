"""The world README's tour is walked in (tests/actors/test_readme_tour.py): a fresh state
root, HOME and git project, a stand-in for the agents the tour names and for an OpenCode
server, and the CLI run exactly as the tour types it."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import select
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO

README = REPO / "README.md"
SHIPPED = sorted(p.stem for p in (REPO / "recipes").glob("*.json"))
Result = subprocess.CompletedProcess[str]


def readme_tour() -> list[tuple[str, str]]:
    """The tour's ```sh block as (command, its comment), in order."""
    text = README.read_text()
    section = text.split("## A short tour", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = []
    for raw in block.splitlines():
        command, *comment = re.split(r"\s+#\s", raw, maxsplit=1)
        if command.strip():
            lines.append((command.strip(), "".join(comment).strip()))
    return lines


def tour_lines() -> list[str]:
    return [command for command, _ in readme_tour()]


AGENT = """#!/bin/sh
# stand-in for `claude -p` / `codex exec`: one file and one commit for the task (its
# last argument), in the worktree it runs in
for task; do :; done
name=$(printf %s "$task" | tr -c 'A-Za-z0-9' _)
echo "done: $task" > "work-$name.txt"
git add -A && git commit -qm "agent: $task"
echo "agent did $task"
"""


class _OpenCodeStandIn(http.server.BaseHTTPRequestHandler):
    """Answers the session routes an `opencode serve` has, with an idle session."""

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/session/status":
            body: Any = {}
        elif path.endswith("/message"):
            body = []
        elif path.startswith("/session/"):
            body = {"id": path.split("/")[2], "title": "tour"}
        else:
            body = {"healthy": True, "version": "stand-in"}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Tour:
    """The tour's world: a fresh state root, HOME and git project, and what it made."""

    base: Path
    env: dict[str, str]
    agent: Path
    opencode_url: str
    cli: list[str] = field(default_factory=lambda: [sys.executable, "-m", "actors"])
    """How `actors` is started: this checkout's, or the one a tool install put on PATH."""
    runs: dict[str, str] = field(default_factory=dict)  # tour name -> run id
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    results: dict[int, list[Result]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)  # what a step saw on the way
    done: int = 0

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def root(self) -> Path:
        return Path(self.env["ACTORS_HOME"])

    def argv(self, command: str) -> list[str]:
        """A tour command as the argv to run: `actors` is this checkout's CLI, the
        external agents and servers are the stand-ins."""
        stand_ins = {
            "claude -p": str(self.agent),
            "agent_cmd=codex exec": f"agent_cmd={self.agent}",
            "url=http://127.0.0.1:4096": f"url={self.opencode_url}",
            "session=ses_...": "session=ses_tour",
        }
        words = [stand_ins.get(w, w) for w in shlex.split(command)]
        assert words[0] == "actors", command
        return [*self.cli, *words[1:]]

    def actors(self, *args: str, timeout: float = 120) -> Result:
        return subprocess.run(
            [*self.cli, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=timeout,
            check=False,
        )

    def run(self, command: str, timeout: float = 120) -> Result:
        return subprocess.run(
            self.argv(command),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=timeout,
            check=False,
        )

    def popen(self, name: str, command: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            self.argv(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=self.project,
        )
        self.procs[name] = proc
        return proc

    def status(self, run: str) -> dict[str, Any]:
        out = self.actors("status", run, "--json")
        assert out.returncode == 0, out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def wait_runner_gone(self, run: str, timeout: float = 60) -> None:
        """Until the run's runner has exited (its follow-up is written by then)."""
        from runtime.core.process import wait_gone

        pid = json.loads((self.root / "runs" / run / "run.json").read_text())["pid"]
        assert wait_gone([int(pid)], timeout), f"runner of {run} still alive after {timeout}s"


def read_until(proc: subprocess.Popen[bytes], needle: bytes, timeout: float = 30) -> bytes:
    """What `proc` printed on stdout up to and including `needle` (select, no sleep)."""
    assert proc.stdout is not None
    fd, seen, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{needle!r} not printed within {timeout}s; got {seen!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"stdout closed before {needle!r}; got {seen!r}"
            seen += chunk
    return seen


def one_run_id(result: Result, prefix: str) -> str:
    match = re.fullmatch(rf"run:({re.escape(prefix)}-[0-9a-z]{{6}})\s*", result.stdout)
    assert match, f"expected run:{prefix}-xxxxxx, got {result.stdout!r} {result.stderr!r}"
    return match.group(1)


def ok(result: Result) -> None:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)


CHECKOUT = Path(__file__).resolve().parents[2]


def tool_install(base: Path, env: dict[str, str]) -> Path:
    """`uv tool install` of this checkout into a fresh HOME under `base` (the README's
    `make install`), from the package registry like a user's; the installed `actors`.
    PATH then holds the tool's bin directory and not this checkout's .venv, so whatever
    the tour's runs start (`actors group run`, recipe scripts) is the installed one too."""
    import shutil

    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv is not None, "uv is a test extra (pyproject.toml): make setup installs it"
    tools, bin_dir = (
        base / "home" / ".local" / "share" / "uv" / "tools",
        base / "home" / ".local" / "bin",
    )
    env.update(UV_TOOL_DIR=str(tools), UV_TOOL_BIN_DIR=str(bin_dir))
    done = subprocess.run(
        [uv, "tool", "install", "--python", sys.executable, str(CHECKOUT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    venv_bin = str(Path(sys.executable).parent)
    kept = [d for d in env.get("PATH", "").split(os.pathsep) if d and d != venv_bin]
    env["PATH"] = os.pathsep.join([str(bin_dir), *kept])
    return bin_dir / "actors"


@contextlib.contextmanager
def tour_world(base: Path, installed: bool = False) -> Iterator[Tour]:
    """A fresh state root, HOME and git project (with a backlog) under `base`, the stand-in
    agent and OpenCode server; every run and process the tour left is killed after. With
    `installed`, `actors` is a tool install of this checkout rather than the checkout."""
    (base / "home").mkdir()
    project = base / "project"
    project.mkdir()
    agent = base / "agent"
    agent.write_text(AGENT)
    agent.chmod(0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTORS_", "CLAUDE_"))}
    env.pop("CODEX_HOME", None)
    env.pop("PI_CODING_AGENT_DIR", None)  # pi's config goes to the fresh HOME too
    env.update(
        ACTORS_HOME=str(base / "state"),
        ACTORS_KILL_GRACE="2",
        HOME=str(base / "home"),
        XDG_CONFIG_HOME=str(base / "home" / ".config"),
        GIT_AUTHOR_NAME="tour",
        GIT_AUTHOR_EMAIL="tour@example.invalid",
        GIT_COMMITTER_NAME="tour",
        GIT_COMMITTER_EMAIL="tour@example.invalid",
    )
    (project / "TODO.md").write_text("- write the first note\n- write the second note\n")
    for git in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *git], cwd=project, env=env, check=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OpenCodeStandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state = Tour(base, env, agent, f"http://127.0.0.1:{server.server_address[1]}")
    if installed:
        state.cli = [str(tool_install(base, env))]
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        for proc in state.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.communicate()
        _reap(state.root)


def _reap(root: Path) -> None:
    from runtime.core.process import kill_session

    for run_json in root.glob("runs/*/run.json"):
        with contextlib.suppress(Exception):
            sid = json.loads(run_json.read_text())["process_identity"]["sid"]
            kill_session(int(sid))

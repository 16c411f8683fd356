"""Issue 17 #11: a runner that cannot be started leaves nothing behind.

Whatever stops the runner from starting (the system refusing the fork, EAGAIN under a
process limit; the interpreter gone, ENOENT), every way to spawn (the CLI's spawn and run,
a `tool:` message, the Python API, the MCP `spawn` tool) refuses in one line naming the
cause, and the claimed state directory is taken back completely: no run under runs/, no
staging directory under tmp/, nothing that reconcile would later report as exited.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, write_recipe
from tests.reliability._checks import refused
from tests.reliability.test_attack_bad_input import _cli_without_fork, no_fork_cgroup

__all__ = ["no_fork_cgroup"]


def assert_nothing_left(home: StateRoot) -> None:
    runs = sorted(os.listdir(home.runs)) if home.runs.exists() else []
    assert runs == [], f"runs left behind: {runs}"
    staged = [n for n in os.listdir(home.tmp)] if home.tmp.exists() else []
    assert not [n for n in staged if n.startswith("spawn-")], staged
    assert actors.runs() == []
    report = json.loads(cli("reconcile", "--json").stdout)
    assert report["exited"] == [] and report["followed_up"] == [], report


@pytest.mark.parametrize(
    "args",
    [
        ["run", "hello", "--name", "ada"],
        ["spawn", "{fifo}", "--as", "run:fifo"],
        ["spawn", "-t", "true", "--as", "run:waited", "--wait"],
        ["spawn", "-t", "true", "--json"],
    ],
    ids=["run-sync-tool", "fifo-endpoint", "spawn-wait", "generated-id-json"],
)
def test_every_cli_spawn_whose_runner_cannot_fork_refuses_and_takes_the_run_back(
    home: StateRoot, tmp_path: Path, no_fork_cgroup: Path, args: list[str]
) -> None:
    fifo = write_recipe(
        tmp_path, "fifo", {"template": "true", "mailbox": {"endpoint": "fifo", "accepts": ["a.b"]}}
    )
    args = [str(fifo) if a == "{fifo}" else a for a in args]
    proc = _cli_without_fork(no_fork_cgroup, *args)
    refused(args, proc, "could not start the runner")
    assert "EAGAIN" in proc.stderr, proc.stderr
    assert_nothing_left(home)


def test_the_api_raises_an_actors_error_when_the_runner_cannot_fork(
    home: StateRoot, no_fork_cgroup: Path
) -> None:
    script = (
        "import actors, sys\n"
        "try:\n"
        "    actors.spawn(template='sleep 5', as_='api')\n"
        "except actors.ActorsError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )

    def enter() -> None:
        with open(no_fork_cgroup / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    proc = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=enter,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "could not start the runner of run api (EAGAIN" in proc.stdout
    assert_nothing_left(home)


@pytest.fixture
def doomed_python(tmp_path: Path) -> Path:
    """A virtual environment's interpreter (a symlink to ours, with our site-packages)
    that a test can delete while the Python it started is still running."""
    venv = tmp_path / "doomed-venv"
    (venv / "bin").mkdir(parents=True)
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    if cfg.exists():
        shutil.copy(cfg, venv / "pyvenv.cfg")
        site = Path(sysconfig.get_paths()["purelib"])
        (venv / site.relative_to(sys.prefix)).parent.mkdir(parents=True)
        os.symlink(site, venv / site.relative_to(sys.prefix))
    python = venv / "bin" / "python"
    os.symlink(os.path.realpath(sys.executable), python)
    return python


def test_the_api_refuses_when_its_interpreter_is_gone(home: StateRoot, doomed_python: Path) -> None:
    script = (
        "import os, sys, actors\n"
        "os.unlink(sys.executable)\n"
        "try:\n"
        "    actors.spawn('hello', as_='orphan')\n"
        "except actors.ActorsError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    proc = subprocess.run(
        [str(doomed_python), "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 3, proc.stderr
    assert "could not start the runner of run orphan (ENOENT" in proc.stdout
    assert_nothing_left(home)


def test_the_mcp_spawn_tool_refuses_when_the_interpreter_is_gone(
    home: StateRoot, tmp_path: Path, doomed_python: Path
) -> None:
    recipe = write_recipe(tmp_path, "later", {"template": "true"})
    server = subprocess.Popen(
        [str(doomed_python), "-m", "actors", "mcp", "--session", "coord-doomed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(message: dict[str, object]) -> dict[str, object]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.flush()
        if "id" not in message:
            return {}
        answer: dict[str, object] = json.loads(server.stdout.readline())
        return answer

    try:
        ask(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        doomed_python.unlink()
        arguments = {"file": str(recipe), "as": "run:gone"}
        call = {"name": "spawn", "arguments": arguments}
        answer = ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        result = answer["result"]
        assert isinstance(result, dict) and result["isError"], answer
        text = result["content"][0]["text"]
        assert "could not start the runner of run gone (ENOENT" in text, text
        assert ask({"jsonrpc": "2.0", "id": 3, "method": "ping"})["id"] == 3
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        server.stdout.close()
        assert server.stderr is not None
        server.stderr.close()
    assert_nothing_left(home)

"""The shipped subagent recipes (`agent`, `review-quorum`) run the real harnesses headless
against the fake model: the final answer becomes the run's `answer` artifact, the
harness's own session id is recorded, and a second run with that id continues the same
conversation (the model sees the first turn again); agents take leases from the `leases`
service through their own shell tool."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, wait_for_change
from tests.peers import run_claude, run_codex, run_opencode, run_pi
from tests.peers.conftest import PEERS_BIN, peer_bin
from tests.peers.fake_llm import FakeLLM


class Setup(NamedTuple):
    env: dict[str, str]
    """What the harness needs in the spawner's environment (it reaches the agent)."""
    values: dict[str, str]
    """More recipe values: the model, tools, flags this setup uses."""
    store: Path
    """Where the harness keeps its own sessions (its throw-away home)."""


def _path(extra: Path | None = None) -> str:
    dirs = [str(extra)] if extra else []
    return os.pathsep.join([*dirs, str(PEERS_BIN), os.environ.get("PATH", "/usr/bin:/bin")])


def _claude(base: Path, port: int, root: Path) -> Setup:
    (base / "config").mkdir(parents=True)
    (base / "home").mkdir()
    env = run_claude.claude_env(base / "config", base / "home", port, root)
    values = {"model": run_claude.MODEL, "tools": "Bash,Read"}
    return Setup(env, values, base)


def _codex(base: Path, port: int, root: Path) -> Setup:
    (base / "codex").mkdir(parents=True)
    (base / "codex" / "config.toml").write_text(run_codex.CONFIG.format(port=port))
    env = {"CODEX_HOME": str(base / "codex"), "HOME": str(base)}
    return Setup(env, {"model": "echo"}, base)


def _opencode(base: Path, port: int, root: Path) -> Setup:
    env = run_opencode._env(base, port, "unused")
    env.pop("OPENCODE_SERVER_PASSWORD")
    return Setup(env, {"model": "fake/echo", "flags": "--pure"}, base)


def _pi(base: Path, port: int, root: Path) -> Setup:
    run_pi.write_models(base / "agent", port)
    # pi's own default model (settings.json), so a recipe that passes no model (the
    # quorum's reviewers) still talks to the fake provider, never to a key in the env
    default = {"defaultProvider": "fake", "defaultModel": "echo"}
    (base / "agent" / "settings.json").write_text(json.dumps(default))
    (base / "home").mkdir()
    env = {
        "HOME": str(base / "home"),
        "PI_CODING_AGENT_DIR": str(base / "agent"),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }
    values = {"model": "fake/echo", "tools": "read,bash", "flags": "--no-extensions,--no-skills"}
    return Setup(env, values, base)


def _gemini(base: Path, port: int, root: Path) -> Setup:
    settings = {
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
    }
    (base / "home" / ".gemini").mkdir(parents=True)
    (base / "home" / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = {
        "HOME": str(base / "home"),
        "GEMINI_API_KEY": "dummy-offline-key",
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_COLOR": "1",
    }
    return Setup(env, {"model": "gemini-2.5-flash"}, base)


SETUPS: dict[str, Callable[[Path, int, Path], Setup]] = {
    "claude": _claude,
    "codex": _codex,
    "opencode": _opencode,
    "pi": _pi,
    "gemini": _gemini,
}


def _spawn(recipe: str, env: dict[str, str], **values: str) -> dict[str, Any]:
    args = [item for key, value in values.items() for item in ("-v", f"{key}={value}")]
    done = cli("spawn", recipe, *args, "--json", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    return record


def _done(record: dict[str, Any]) -> dict[str, Any]:
    finished(record, timeout=180)
    result = actors.result(record["run"])
    stderr = Path(record["state_dir"], "stderr.log")
    assert result["status"] == "done", (result, stderr.read_text() if stderr.exists() else "")
    return result


def _session(record: dict[str, Any]) -> dict[str, Any]:
    path = Path(record["state_dir"]) / "agent" / "session.json"
    session: dict[str, Any] = json.loads(path.read_text())
    return session


def _in_store(store: Path, text: str, skip: Path) -> bool:
    """The id is the harness's own: some file it wrote names it (in its name or bytes)."""
    needle = text.encode()
    for path in store.rglob("*"):
        if skip in path.parents or not path.is_file() or path.is_symlink():
            continue
        if text in path.name or (path.stat().st_size < 50_000_000 and needle in path.read_bytes()):
            return True
    return False


@pytest.mark.parametrize("harness", list(SETUPS))
def test_agent_recipe_answer_artifact_native_session_and_resume(
    harness: str, home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    peer_bin(harness)
    setup = SETUPS[harness](tmp_path / harness, fake_llm.port, home.path)
    env = {**setup.env, "ACTORS_HOME": str(home.path), "PATH": _path()}
    project = tmp_path / "project"
    project.mkdir()
    first_token = f"TOKEN-{harness}-{secrets.token_hex(4)}"  # the prompt starts with an
    # option each harness knows: it must reach the model as text, never as the option
    record = _spawn(
        "agent",
        env,
        harness=harness,
        prompt=f"--version {first_token}",
        cwd=str(project),
        **setup.values,
    )
    result = _done(record)
    answer = Path(record["state_dir"]) / "agent" / "answer.md"
    assert answer.read_text() == f"ACK {first_token}\n"
    assert result["output"].strip() == f"ACK {first_token}"
    manifest = result["artifacts"]
    assert manifest["answer"]["exists"] and manifest["session"]["exists"]
    session = _session(record)
    assert session["harness"] == harness and session["session_id"]
    assert session["cwd"] == str(project)
    assert _in_store(setup.store, session["session_id"], home.path), session
    if harness == "pi":  # `tools` reached the harness: the model is offered only those
        asked = fake_llm.wait_request(lambda r: first_token in json.dumps(r["body"]))
        offered = {tool["function"]["name"] for tool in asked["body"].get("tools", [])}
        assert offered == {"read", "bash"}, offered
    messages = actors.inspect(f"run:{record['run']}", view="messages")["messages"]
    emitted = [m for m in messages if m["type"] == "agent.result"]
    assert emitted[-1]["body"]["session_id"] == session["session_id"]
    assert emitted[-1]["body"]["answer"] == f"ACK {first_token}"

    # a coordinator continues the same session with the recorded id
    second_token = f"TOKEN-{harness}-{secrets.token_hex(4)}"
    seen = len(fake_llm.requests)
    again = _spawn(
        "agent",
        env,
        harness=harness,
        prompt=f"Now {second_token}",
        cwd=str(project),
        session=session["session_id"],
        **setup.values,
    )
    _done(again)
    assert (Path(again["state_dir"]) / "agent" / "answer.md").read_text() == f"ACK {second_token}\n"
    assert _session(again)["session_id"] == session["session_id"]
    fake_llm.wait_request(
        lambda r: first_token in json.dumps(r["body"]) and second_token in json.dumps(r["body"]),
        start=seen,
        timeout=5,
    )


def test_agent_recipe_refuses_what_a_harness_cannot_do(home: StateRoot, tmp_path: Path) -> None:
    """codex has no allowed-tools option: one line, exit 2, the run fails with it."""
    peer_bin("codex")
    env = {"PATH": _path(), "HOME": str(tmp_path)}
    record = _spawn("agent", env, harness="codex", prompt="hi", tools="Bash")
    finished(record)
    result = actors.result(record["run"])
    assert (result["status"], result["code"]) == ("failed", 2)
    stderr = Path(record["state_dir"], "stderr.log").read_text()
    assert "codex has no allowed-tools option" in stderr


def test_review_quorum_survives_a_failed_reviewer_and_fails_below_the_quorum(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Three reviewers (claude, pi, and a gemini that is not installed on this PATH): with
    quorum 2 the merger (claude) reads both reviews and the failed one's header; with
    quorum 3 the run fails and the merger never runs."""
    for name in ("claude", "pi"):
        peer_bin(name)
    only = tmp_path / "bin"  # claude and pi, and no gemini
    only.mkdir()
    for name in ("claude", "pi"):
        (only / name).symlink_to((PEERS_BIN / name).resolve())
    claude = _claude(tmp_path / "claude", fake_llm.port, home.path)
    pi = _pi(tmp_path / "pi", fake_llm.port, home.path)
    system = os.environ.get("PATH", "/usr/bin:/bin")
    env = {
        **claude.env,
        **{k: v for k, v in pi.env.items() if k != "HOME"},
        "ACTORS_HOME": str(home.path),
        "PATH": os.pathsep.join([str(only), system]),
    }
    assert not any((Path(d) / "gemini").exists() for d in env["PATH"].split(os.pathsep))
    token = f"TOKEN-review-{secrets.token_hex(4)}"
    record = _spawn(
        "review-quorum", env, reviewers="claude,pi,gemini", prompt=f"Review {token}", quorum="2"
    )
    result = _done(record)
    assert result["degraded"] is True
    merged = fake_llm.wait_request(lambda r: "Merge the code reviews" in json.dumps(r["body"]))
    text = json.dumps(merged["body"])
    assert "--- branch: review-0 status: done ---" in text
    assert "--- branch: review-1 status: done ---" in text
    assert "--- branch: review-2 status: failed ---" in text
    answer = (Path(record["state_dir"]) / "agent" / "answer.md").read_text()
    assert answer == f"ACK {token} {token}\n"  # both reviews reached the merger
    reviews = Path(record["state_dir"]) / "reviews"
    assert (reviews / "0" / "answer.md").read_text() == f"ACK {token}\n"
    assert (reviews / "1" / "answer.md").read_text() == f"ACK {token}\n"
    assert not (reviews / "2" / "answer.md").exists()
    assert _session(record)["session_id"]

    merges = sum("Merge the code reviews" in json.dumps(r["body"]) for r in fake_llm.requests)
    short = _spawn(
        "review-quorum", env, reviewers="claude,pi,gemini", prompt=f"Review {token}", quorum="3"
    )
    finished(short, timeout=180)
    failed = actors.result(short["run"])
    assert failed["status"] == "failed"
    assert "2 of 3 branches usable (minimum 3)" in json.dumps(failed)
    assert (
        sum("Merge the code reviews" in json.dumps(r["body"]) for r in fake_llm.requests) == merges
    )


def test_agent_workers_contend_for_a_lease_through_their_own_shell_tool(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Two real Claude Code agents (agent recipe runs) ask the leases service for the same
    file through their Bash tool: the first is granted, the second denied naming the
    first; the holder is each agent's run (its token reaches the tool's shell)."""
    peer_bin("claude")
    service = actors.spawn("leases")
    table = Path(service["state_dir"]) / "leases" / "leases.json"
    wait_for_change(Path(service["state_dir"]), table.exists, what="the lease table")
    claude = _claude(tmp_path / "claude", fake_llm.port, home.path)
    env = {**claude.env, "ACTORS_HOME": str(home.path), "PATH": _path()}
    command = f"actors message run:{service['run']} lease.acquire src/auth.py --force"
    runs = []
    for name in ("first", "second"):
        token = f"TOKEN-{name}-{secrets.token_hex(3)}"
        record = _spawn(
            "agent", env, harness="claude", prompt=f"[tool:Bash:{command}] {token}", tools="Bash"
        )
        _done(record)
        runs.append(record)
    room = actors.inspect(f"room:{service['run']}", view="messages")["messages"]
    answers = [(m["type"], m["body"]["holder"]) for m in room]
    assert answers == [
        ("lease.granted", f"run:{runs[0]['run']}"),
        ("lease.denied", f"run:{runs[1]['run']}"),
    ], answers
    assert json.loads(table.read_text())["leases"]["src/auth.py"]["holder"] == (
        f"run:{runs[0]['run']}"
    )
    actors.message(f"run:{service['run']}", "control.kill")

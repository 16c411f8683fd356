"""Swarms of real agents: the shipped swarm recipes with real harness workers.

The workers of `backlog-implementers` and the scopes of `collab-branches` run the real
Claude Code (`claude -p`) and the real Codex (`codex exec`) headless, against the fake
model: a prompt (a backlog item, a scope's instruction) that carries `[tool:NAME:ARG]`
makes the model call that harness's own shell tool (Claude Code's `Bash`, Codex's
`exec_command`), so every edit is made by the harness in a real git worktree, on a real
branch, and lands as a real commit. The backlog coordinator is a real Claude Code session
too (`actors install claude-code --user`): its model spawns the run, reads the room's
`task.result`s, sends each next `task.assign`, is woken by a failed task's `task.failed`
follow-up with its reason, and ends the run with `control.kill`, all through actors' MCP
tools. Each test keeps to a few tasks: every agent turn is a real harness start.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.views.status import load_run
from tests.conftest import cli, finished
from tests.integration.test_backlog_swarm import (  # noqa: F401  (repo: the fixture)
    git,
    idle,
    of,
    repo,
    results,
    wait_room,
)
from tests.peers.conftest import peer_bin
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_claude import DOORBELL_ONLY, MODEL, ClaudeSession, claude_session
from tests.peers.run_codex import CONFIG as CODEX_CONFIG
from tests.peers.test_mcp_claude import call_tool, first_turn, tool_results, wait_wake
from tests.reliability.test_self_healing import _marked

TURN_S = 120  # one agent turn: a real harness start plus one or two model round trips

# The backlog, top to bottom: front (Claude Code) takes from the top, back (Codex) from
# the bottom. The middle item has no marker: the agent only answers, edits nothing, and
# the validation refuses that with a reason the coordinator must get.
ALPHA = "add alpha [tool:Bash:echo alpha by claude > alpha.txt]"
PLAN = "only explain the plan TOKEN-PLAN"
HELD = "review the design [gate:held]"
OMEGA = 'add omega [tool:exec_command:{"cmd": "echo omega by codex > omega.txt"}]'
BACKLOG = f"# Backlog\n\n- [ ] {ALPHA}\n- [ ] {PLAN}\n- [ ] {HELD}\n- [ ] {OMEGA}\n"
VALIDATE = """\
import subprocess, sys
changed = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
sys.exit(0 if changed.stdout.strip() else "TOKEN-NO-EDIT: the agent changed no file")
"""


def claude_worker(tmp_path: Path) -> str:
    """`claude -p` for one prompt, in its own empty config dir (no actors hooks: a worker
    is not a coordinator), the model and offline settings inherited from the run's env."""
    config = tmp_path / "claude-worker"
    config.mkdir()
    return shlex.join(
        [
            "env",
            "-u",
            "CLAUDECODE",  # set for a Claude Code session's children: not a nested session
            f"CLAUDE_CONFIG_DIR={config}",
            str(peer_bin("claude")),
            "-p",
            "--allowedTools",  # variadic: it must not be last, or it takes the prompt
            "Bash",
            "--model",
            MODEL,
        ]
    )


def codex_worker(tmp_path: Path, port: int) -> str:
    """`codex exec` for one prompt, its CODEX_HOME pointing the model at the fake LLM."""
    home = tmp_path / "codex-worker"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_CONFIG.format(port=port))
    return shlex.join(
        [
            "env",
            f"CODEX_HOME={home}",
            str(peer_bin("codex")),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ]
    )


@pytest.fixture
def coordinator(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    """A real Claude Code session set up as docs/harnesses.md says, allowed actors' tools;
    woken by the doorbell (DOORBELL_ONLY: the test reads the inbox after the wake, which a
    socket wake would have marked read)."""
    binary = peer_bin("claude")
    allow = ("--allowedTools", "mcp__actors")
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=allow, settings=DOORBELL_ONLY
    ) as session:
        yield session


def assign(claude: ClaudeSession, llm: FakeLLM, run: str, worker: str, **body: Any) -> None:
    """The coordinator's model sends `task.assign` to one worker (its MCP message tool)."""
    seen = call_tool(
        claude,
        llm,
        "message",
        {
            "to": f"branch:{run}/{worker}",
            "type": "task.assign",
            "body": {"backlog": "next", **body},
        },
    )
    assert "queued" in seen or "delivered" in seen, seen


def test_claude_and_codex_workers_under_a_claude_code_coordinator(
    coordinator: ClaudeSession,
    fake_llm: FakeLLM,
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    session = first_turn(coordinator)
    (tmp_path / "backlog.md").write_text(BACKLOG)
    (tmp_path / "validate.py").write_text(VALIDATE)
    values = {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(repo),
        "agent_cmd": claude_worker(tmp_path),
        "validate_cmd": f"python3 {tmp_path / 'validate.py'}",
        "self_select": "false",  # every task comes from the coordinator
    }
    seen = call_tool(
        coordinator,
        fake_llm,
        "spawn",
        {"recipe": "backlog-implementers", "as": "run:swarm", "values": values},
    )
    assert "started run:swarm" in seen, seen
    run = "swarm"
    assert actors.status(run)["owner_id"] == session
    wait_room(home, run, lambda ms: idle(ms, run, "front") and idle(ms, run, "back"))

    # Two workers, two harnesses, opposite ends: front keeps the recipe's Claude Code,
    # back's assignment names Codex.
    assign(coordinator, fake_llm, run, "front")
    assign(coordinator, fake_llm, run, "back", agent_cmd=codex_worker(tmp_path, fake_llm.port))
    messages = wait_room(
        home,
        run,
        lambda ms: len(results(ms)) == 2 and idle(ms, run, "front") and idle(ms, run, "back"),
        timeout=2 * TURN_S,
    )
    landed = {}
    for worker, index, item, name, text, api in (
        ("front", 1, ALPHA, "alpha.txt", "alpha by claude", "/v1/messages"),
        ("back", 4, OMEGA, "omega.txt", "omega by codex", "/v1/responses"),
    ):
        # the item reached the model through that harness's own API
        assert any(
            r["path"].startswith(api) and item in last_user_text(r["body"])
            for r in fake_llm.requests
        ), (worker, api)
        (claim,) = [m["body"] for m in of(messages, run, worker) if m["type"] == "task.claim"]
        assert (claim["index"], claim["item"]) == (index, item)
        (result,) = [m["body"] for m in of(messages, run, worker) if m["type"] == "task.result"]
        assert result["ok"], result
        branch = f"actors/{run}/{worker}"
        assert git(repo, "rev-parse", branch) == result["commit"]
        assert git(repo, "show", f"{result['commit']}:{name}") == text  # the harness wrote it
        assert git(repo, "log", "-1", "--format=%s", branch) == item
        landed[worker] = result["commit"]
    assert git(repo, "log", "--format=%s", "main") == "initial"  # nothing merged

    # The coordinator reads the results (what its model got back names both commits) ...
    seen = call_tool(
        coordinator, fake_llm, "inspect", {"target": f"room:{run}", "view": "messages", "lines": 50}
    )
    for commit in landed.values():
        assert commit[:12] in seen, seen
    # ... and sends the next assignment: the middle item, which the agent only answers.
    start = len(fake_llm.requests)
    assign(coordinator, fake_llm, run, "front")
    messages = wait_room(
        home, run, lambda ms: len(results(ms)) == 3 and idle(ms, run, "front"), timeout=TURN_S
    )
    failed = results(messages)[-1]
    assert failed["item"] == PLAN and failed["ok"] is False and failed["commit"] is None
    assert "TOKEN-NO-EDIT: the agent changed no file" in failed["reason"]
    assert git(repo, "rev-parse", f"actors/{run}/front") == landed["front"]

    # The failure wakes the idle coordinator with its reason, and its model reads it.
    woke = wait_wake(fake_llm, session, start)
    assert f"Run {run}: front failed task" in woke and "TOKEN-NO-EDIT" in woke, woke
    seen = call_tool(coordinator, fake_llm, "inbox_read", {})
    assert "task.failed" in seen and "TOKEN-NO-EDIT" in seen, seen

    # The next task keeps its agent mid-turn (the model holds the reply), and then
    # control.kill from the coordinator ends the run: no process of the run is left.
    start = len(fake_llm.requests)
    assign(coordinator, fake_llm, run, "front")
    fake_llm.wait_request(lambda r: "[gate:held]" in last_user_text(r["body"]), start, TURN_S)
    instance = load_run(home.run(run))["run_instance_id"]
    assert any(b"claude" in cmdline(pid) for pid in _marked(instance)), "the agent should run"
    seen = call_tool(coordinator, fake_llm, "message", {"to": f"run:{run}", "type": "control.kill"})
    assert "queued" in seen or "delivered" in seen, seen
    final = finished(actors.status(run))
    assert final["status"] == "killed" and final["reason"] == "control.kill", final
    assert _marked(instance) == [], "a process of the run survived control.kill"
    fake_llm.release("held")


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def scope_agent(tmp_path: Path, port: int) -> str:
    """The collab agent command: the scope (its last argument) picks the harness and the
    prompt; `sh` only dispatches, the edit and the commit are the harness's tool calls."""
    commit = "git add -A && git commit -qm"
    prompts = {
        "claude": f"[tool:Bash:echo claude scope > claude.txt && {commit} scope-claude]",
        "codex": f'[tool:exec_command:{{"cmd": "echo codex scope > codex.txt && {commit} scope-codex"}}]',
        "idle": "only describe the change TOKEN-IDLE",
    }
    # sh -c SCRIPT IDLE CLAUDE CODEX SCOPE: $0..$2 the prompts, $3 the scope
    script = 'case "$3" in codex) exec $CODEX "$2";; idle) exec $CLAUDE "$0";; *) exec $CLAUDE "$1";; esac'
    return shlex.join(
        [
            "env",
            f"CLAUDE={claude_worker(tmp_path)}",
            f"CODEX={codex_worker(tmp_path, port)}",
            "sh",
            "-c",
            script,
            prompts["idle"],
            prompts["claude"],
            prompts["codex"],
        ]
    )


def test_collab_branches_with_claude_and_codex_scopes(
    home: StateRoot,
    fake_llm: FakeLLM,
    tmp_path: Path,
    repo: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{fake_llm.port}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy-offline-peers-tier")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli("session", "register", "--harness", "file", "--id", "coord").returncode == 0
    record = actors.spawn(
        "collab-branches",
        values={
            "scopes": "claude,codex,idle",
            "repo": str(repo),
            "agent_cmd": scope_agent(tmp_path, fake_llm.port),
            "base": "main",
        },
        session="coord",
    )
    summary = finished(record, timeout=6 * TURN_S)
    assert summary["status"] == "done" and summary["degraded"], summary
    report = json.loads((Path(record["state_dir"]) / "collab" / "branches.json").read_text())
    assert [r["scope"] for r in report["ready"]] == ["claude", "codex"]
    for ready in report["ready"]:
        scope = ready["scope"]
        assert git(repo, "log", "-1", "--format=%s", ready["branch"]) == f"scope-{scope}"
        assert git(repo, "show", f"{ready['branch']}:{scope}.txt") == f"{scope} scope"
    (failed,) = report["failed"]
    assert failed["scope"] == "idle" and failed["reason"] == "the agent made no commit"
    assert git(repo, "log", "--format=%s", "main") == "initial"  # never merged
    (told,) = SessionInbox(session_paths(home, "coord")).unread()
    assert told["envelope"]["type"] == "run.done" and told["envelope"]["body"]["degraded"]
    assert any("TOKEN-IDLE" in last_user_text(r["body"]) for r in fake_llm.requests)


@pytest.fixture
def merging_coordinator(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> Iterator[ClaudeSession]:
    """A real Claude Code coordinator allowed actors' tools and its own shell tool; woken
    by the doorbell like `coordinator` (the test reads the inbox after the wake)."""
    binary = peer_bin("claude")
    allow = ("--allowedTools", "mcp__actors", "Bash", "--verbose")
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, extra_args=allow, settings=DOORBELL_ONLY
    ) as session:
        yield session


def test_a_claude_and_codex_swarm_drains_once_and_its_coordinator_merges_a_branch(
    merging_coordinator: ClaudeSession,
    fake_llm: FakeLLM,
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    """Two workers on two harnesses in one swarm (`agent_cmds`: front is Claude Code,
    back is Codex), self-selecting from opposite ends; the swarm drains, says so once,
    and ends done; the coordinator's model reads the `swarm.drained` follow-up and
    merges the branch it names with its shell tool."""
    coordinator = merging_coordinator
    session = first_turn(coordinator)
    (tmp_path / "backlog.md").write_text(f"# Backlog\n\n- [ ] {ALPHA}\n- [ ] {OMEGA}\n")
    (tmp_path / "validate.py").write_text(VALIDATE)
    values = {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(repo),
        # the comma form of an array: the fake model's `[tool:...]` marker holds no `]`
        "agent_cmds": f"{claude_worker(tmp_path)},{codex_worker(tmp_path, fake_llm.port)}",
        "validate_cmd": f"python3 {tmp_path / 'validate.py'}",
        "base": "main",
    }
    start = len(fake_llm.requests)
    seen = call_tool(
        coordinator,
        fake_llm,
        "spawn",
        {"recipe": "backlog-implementers", "as": "run:swarm2", "values": values},
    )
    assert "started run:swarm2" in seen, seen
    run = "swarm2"
    final = finished(actors.status(run), timeout=3 * TURN_S)
    assert final["status"] == "done", final  # ended by itself: nobody stopped it

    # each item reached the model through its worker's harness: front's Claude Code
    # (Anthropic's API), back's Codex (the Responses API)
    for item, api in ((ALPHA, "/v1/messages"), (OMEGA, "/v1/responses")):
        assert any(
            r["path"].startswith(api) and item in last_user_text(r["body"])
            for r in fake_llm.requests
        ), (item, api)
    told = [e["envelope"] for e in SessionInbox(session_paths(home, session)).entries()]
    drained = [t for t in told if t["type"] == "swarm.drained"]
    assert len(drained) == 1, [t["type"] for t in told]
    body = drained[0]["body"]
    assert (body["done"], body["failed"]) == (2, 0), body
    branches = {b["worker"]: b for b in body["branches"]}
    assert set(branches) == {"front", "back"} and all(
        b["merges_cleanly"] for b in branches.values()
    ), branches
    assert git(repo, "show", f"{branches['front']['head']}:alpha.txt") == "alpha by claude"
    assert git(repo, "show", f"{branches['back']['head']}:omega.txt") == "omega by codex"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1

    # The drained follow-up wakes the idle coordinator; its model reads it ...
    woke = wait_wake(fake_llm, session, start)
    assert f"Run {run}" in woke, woke
    seen = call_tool(coordinator, fake_llm, "inbox_read", {"bodies": True})
    assert seen.count("swarm.drained") >= 1 and branches["front"]["merge"] in seen, seen
    # ... and merges the front branch with its own shell tool, as the follow-up says.
    merge = branches["front"]["merge"]
    start, mark = len(fake_llm.requests), coordinator.mark()
    coordinator.send_user(f"[tool:Bash:{merge}]")
    result = coordinator.next_result(timeout=TURN_S, after=mark)
    assert result["is_error"] is False, result
    answered = fake_llm.wait_request(lambda r: bool(tool_results(r["body"])), start, TURN_S)
    (shell,) = tool_results(answered["body"])
    assert "Fast-forward" in shell, shell
    assert git(repo, "rev-parse", "main") == branches["front"]["head"]  # a fast-forward
    assert git(repo, "show", "main:alpha.txt") == "alpha by claude"

"""A swarm that could not work is refused before anything exists.

`backlog-implementers` and `collab-branches` run their precheck at spawn: an agent or
validation command that cannot start, a repository that is not git or lacks the base, a
backlog that cannot be read, a number of workers a swarm cannot have. Each is one line
naming what is wrong, exit 2, and no run, branch, worktree or claim: the state root and
the repository are as they were. Through the CLI (the README's own swarm line on a
machine without codex was the case that burned a whole backlog in five seconds) and
through the MCP `spawn` tool.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from runtime.store.layout import StateRoot
from tests.conftest import cli, snapshot
from tests.integration.test_backlog_swarm import git, repo  # noqa: F401  (repo: the fixture)


def repo_state(at: Path) -> tuple[str, str, str]:
    """Every ref, every worktree and the status of the repository."""
    return (
        git(at, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(at, "worktree", "list", "--porcelain"),
        git(at, "status", "--porcelain", "--ignored"),
    )


@pytest.fixture
def world(home: StateRoot, tmp_path: Path, repo: Path) -> dict[str, Any]:  # noqa: F811
    (tmp_path / "backlog.md").write_text("- [ ] one\n- [ ] two\n")
    (tmp_path / "not-git").mkdir()
    (tmp_path / "plain.txt").write_text("not a program\n")
    (tmp_path / "bad.md").write_bytes(b"- caf\xe9\n")
    return {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(repo),
        "tmp": tmp_path,
    }


SWARM_CASES = [
    # (values over the good ones, what the one line says)
    ({"agent_cmd": "codex exec"}, "agent_cmd cannot start: 'codex' is not on PATH"),
    (
        {"agent_cmd": "env -u CLAUDECODE X=1 no-such-claude -p"},
        "agent_cmd cannot start: 'no-such-claude' is not on PATH",
    ),
    ({"agent_cmd": "./scripts/agent.sh"}, "'./scripts/agent.sh' is not a file in"),
    ({"agent_cmd": "{tmp}/plain.txt"}, "plain.txt' is not an executable file"),
    ({"agent_cmd": ""}, "no agent command: pass -v agent_cmd="),
    ({"agent_cmd": "claude 'unbalanced"}, "cannot split agent_cmd"),
    ({"agent_cmds": '["true", "no-such-second"]'}, "'no-such-second' is not on PATH"),
    ({"validate_cmd": "no-such-linter --all"}, "validate_cmd cannot start: 'no-such-linter'"),
    ({"repo": "{tmp}/not-git"}, "not-git is not a git repository"),
    ({"base": "no-such-branch"}, "base 'no-such-branch' is not a commit in"),
    ({"workers": "0"}, "workers must be from 1 to 64, got 0"),
    ({"workers": "65"}, "workers must be from 1 to 64, got 65"),
    ({"parallel": "-1"}, "parallel must be from 0 to 1024, got -1"),
    ({"task_timeout": "-5"}, "task_timeout '-5' is not a number of seconds"),
    ({"backlog": "{tmp}/missing.md"}, "missing.md does not exist"),
    ({"backlog": "{tmp}/bad.md"}, "bad.md is not UTF-8 text"),
    ({"backlog": "", "items": "[]"}, "no backlog: pass -v backlog=FILE"),
    ({"items": '["x"]'}, "give backlog or items, not both"),
    ({"group": "nobody-made-it"}, "group 'nobody-made-it' does not exist; create it"),
    ({"backlog": "", "items": '["ok", " "]'}, "items holds an empty item"),
]


@pytest.mark.parametrize(("bad", "says"), SWARM_CASES, ids=[c[1][:40] for c in SWARM_CASES])
def test_a_swarm_that_could_not_work_is_refused_and_nothing_is_made(
    home: StateRoot, world: dict[str, Any], bad: dict[str, str], says: str
) -> None:
    tmp = world["tmp"]
    values = {"backlog": world["backlog"], "repo": world["repo"], "agent_cmd": "true"}
    values.update({k: v.replace("{tmp}", str(tmp)) for k, v in bad.items()})
    before_root, before_repo = snapshot(home.path), repo_state(Path(world["repo"]))
    argv = ["spawn", "backlog-implementers"]
    for key, value in values.items():
        argv += ["-v", f"{key}={value}"]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # no codex, no claude
    proc = cli(*argv, env=env)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("actors: backlog-implementers: ") and says in line, line
    assert proc.stdout == ""
    assert snapshot(home.path) == before_root  # no run, no claim table, no session file
    assert repo_state(Path(world["repo"])) == before_repo  # no branch, no worktree


COLLAB_CASES = [
    ({"agent_cmd": "codex exec"}, "agent_cmd cannot start: 'codex' is not on PATH"),
    ({"agent_cmd": "{tmp}/plain.txt"}, "plain.txt' is not an executable file"),
    ({"check_cmd": "no-such-check"}, "check_cmd cannot start: 'no-such-check' is not on PATH"),
]


@pytest.mark.parametrize(("bad", "says"), COLLAB_CASES, ids=[c[1][:40] for c in COLLAB_CASES])
def test_collab_branches_that_could_not_work_are_refused_and_nothing_is_made(
    home: StateRoot, world: dict[str, Any], bad: dict[str, str], says: str
) -> None:
    tmp = world["tmp"]
    values = {"scopes": "a,b,c,d,e,f", "repo": world["repo"], "agent_cmd": "true", "base": "main"}
    values.update({k: v.replace("{tmp}", str(tmp)) for k, v in bad.items()})
    before_root, before_repo = snapshot(home.path), repo_state(Path(world["repo"]))
    argv = ["spawn", "collab-branches"]
    for key, value in values.items():
        argv += ["-v", f"{key}={value}"]
    proc = cli(*argv, env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("actors: collab-branches: ") and says in line, line
    assert snapshot(home.path) == before_root
    assert repo_state(Path(world["repo"])) == before_repo  # no collab/* branch, no worktree


async def test_the_mcp_spawn_tool_is_refused_the_same_way_and_nothing_is_made(
    home: StateRoot, world: dict[str, Any]
) -> None:
    """The README's swarm line through an agent's MCP tool, on a machine without codex:
    the tool answers with the one line as an error; nothing exists after it."""
    before_repo = repo_state(Path(world["repo"]))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "actors", "mcp", "--session", "coord-mcp"], env=env
    )
    values = {"backlog": world["backlog"], "repo": world["repo"], "agent_cmd": "codex exec"}
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        before_root = snapshot(home.path)
        answer = await session.call_tool(
            "spawn", {"recipe": "backlog-implementers", "values": values}
        )
        assert answer.is_error
        text = answer.content[0].text
        assert "agent_cmd cannot start: 'codex' is not on PATH" in text, text
        assert "Traceback" not in text and len(text.splitlines()) == 1, text
        assert snapshot(home.path) == before_root
    assert not home.runs.exists() or not list(home.runs.iterdir())
    assert repo_state(Path(world["repo"])) == before_repo

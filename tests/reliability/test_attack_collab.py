"""Issue 17 #13: collab-branches maps scopes that differ only in punctuation (`api v1`,
`api-v1`) to one branch (and worktree). Colliding scopes must be refused up front: exit 2,
one line naming both, no run and no branch created.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli
from tests.reliability._checks import refused


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(
        path,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "root",
    )
    return path


@pytest.mark.parametrize(
    "scopes",
    [
        ["api v1", "api-v1"],
        ["API/v1", "API v1"],
        ["ui.", "ui"],
        ["a" * 60 + "x", "a" * 60 + "y"],  # the slug keeps 60 characters
    ],
    ids=["space-vs-dash", "slash-vs-space", "trailing-dot", "past-60-chars"],
)
def test_colliding_scopes_are_refused_up_front(
    home: StateRoot, repo: Path, scopes: list[str]
) -> None:
    branches_before = _git(repo, "branch", "--list")
    args = [
        "run", "collab-branches", "--scopes", json.dumps(scopes), "--repo", str(repo),
        "--agent_cmd", "true", "--as", "run:collab",
    ]  # fmt: skip
    refused(args, cli(*args, timeout=120))
    assert not (home.runs / "collab").exists(), "a run was started"
    assert _git(repo, "branch", "--list") == branches_before


# -- siblings: every scope list or value the recipe cannot use is refused up front --------------


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"scopes": '["api", "API"]'}, "would share the branch"),
        ({"scopes": '["Docs", "docs!"]'}, "would share the branch"),
        ({"scopes": '["api", "api"]'}, "given twice"),
        ({"scopes": '["a..b", "a.b"]'}, "would share the branch"),
        ({"scopes": '["!!!", "scope"]'}, "would share the branch"),
        ({"scopes": "[]"}, "non-empty list"),
        ({"scopes": '[{"a": 1}]'}, "not a name"),
        ({"scopes": '["ok", "  "]'}, "not a name"),
        ({"repo": "{tmp}/nowhere"}, "not a directory"),
        ({"base": "no-such-branch"}, "not a commit"),
        ({"agent_cmd": "'unbalanced"}, "cannot be split"),
        ({"agent_cmd": ""}, "agent_cmd is empty"),
        ({"check_cmd": 'make "test'}, "cannot be split"),
    ],
    ids=[
        "case-fold",
        "punctuation-case",
        "duplicate",
        "dot-run",
        "empty-slug",
        "empty-list",
        "object-scope",
        "blank-scope",
        "missing-repo",
        "missing-base",
        "unbalanced-agent",
        "empty-agent",
        "unbalanced-check",
    ],
)
def test_bad_collab_values_are_refused_in_one_line_before_anything_exists(
    home: StateRoot, repo: Path, tmp_path: Path, values: dict[str, str], needle: str
) -> None:
    given = {"scopes": '["api", "ui"]', "repo": str(repo), "agent_cmd": "true", **values}
    args = ["spawn", "collab-branches", "--as", "run:collab"]
    for name, value in given.items():
        args += ["-v", f"{name}={value.replace('{tmp}', str(tmp_path))}"]
    branches_before = _git(repo, "branch", "--list")
    line = refused(args, cli(*args, timeout=120), needle)
    assert line.startswith("actors: collab-branches: "), line
    assert not home.runs.exists() or list(home.runs.iterdir()) == []
    assert _git(repo, "branch", "--list") == branches_before
    assert _git(repo, "worktree", "list").count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--state", "{tmp}", "--scopes", "{}"],
        ["check", "--scopes", "a", "--repo", "{tmp}/gone", "--base", "main", "--run", "r", "--agent-cmd", "x"],
        ["run", "--state", "{tmp}/s", "--repo", "{tmp}/gone", "--base", "main", "--run", "r", "--scope", "a", "--agent-cmd", "x"],
    ],
    ids=["report-bad-scopes", "check-missing-repo", "run-missing-repo"],
)  # fmt: skip
def test_the_collab_script_says_one_line_for_a_user_error(tmp_path: Path, argv: list[str]) -> None:
    script = Path(__file__).resolve().parents[2] / "recipes" / "scripts" / "collab_branch.py"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = subprocess.run(
        ["python3", str(script), *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (1, 2)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_recipe_precheck_refuses_with_its_last_line_and_lets_good_values_through(
    home: StateRoot, tmp_path: Path
) -> None:
    from tests.conftest import write_recipe

    recipe = write_recipe(
        tmp_path,
        "gated",
        {
            "precheck": 'sh -c \'echo noise >&2; [ "$1" = ok ] || { echo "n must be ok, not $1" >&2; exit 3; }\' p {n}',
            "template": "echo {n}",
        },
    )
    args = ["spawn", str(recipe), "-v", "n=bad", "--as", "run:gated"]
    refused(args, cli(*args), "gated: n must be ok, not bad")
    assert not home.runs.exists() or list(home.runs.iterdir()) == []
    missing = write_recipe(
        tmp_path, "nocheck", {"precheck": "/no/such/checker {n}", "template": "true"}
    )
    args = ["spawn", str(missing), "-v", "n=1"]
    refused(args, cli(*args), "could not start")
    done = cli("spawn", str(recipe), "-v", "n=ok", "--as", "run:gated", "--wait")
    assert done.returncode == 0, done.stderr

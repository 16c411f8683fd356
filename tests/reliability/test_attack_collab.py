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


@pytest.mark.xfail(
    reason="issue 17 #13: collab-branches maps scopes differing only in punctuation to one branch",
    strict=True,
)
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

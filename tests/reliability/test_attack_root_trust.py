"""Issue 17 #2 (a state root is trusted only if it is yours) and #6 (run tokens).

#2: like ssh's StrictModes, a root created by another user, or a directory in it that
is group- or world-writable or owned by someone else, is refused in one line that says
how to fix it; today it is used with no warning.

#6: a run's `token` file holds the token itself, so any process of the same user (a child
of another run) reads it and acts as that run. The file must hold a verifier.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, make_fifo, read_fifo_line, write_recipe
from tests.reliability._attack import NOBODY
from tests.reliability._checks import refused


def _populated(home: StateRoot) -> None:
    proc = cli("spawn", "hello", "--as", "run:h", "--wait")
    assert proc.returncode == 0, proc.stderr


def _chown_tree(path: Path, uid: int) -> None:
    for dirpath, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(dirpath, name), uid, uid)
    os.chown(path, uid, uid)


# -- #2 a root that is not yours ------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["ls"], ["spawn", "hello", "--as", "run:mine"], ["reconcile"], ["status", "h"]],
    ids=["ls", "spawn", "reconcile", "status"],
)
def test_a_root_owned_by_another_user_is_refused(home: StateRoot, args: list[str]) -> None:
    _populated(home)
    _chown_tree(home.path, NOBODY)
    refused(args, cli(*args), str(home.path))
    assert not (home.runs / "mine").exists()


def test_an_empty_root_created_by_another_user_is_refused(home: StateRoot) -> None:
    home.path.mkdir(parents=True)
    os.chown(home.path, NOBODY, NOBODY)
    os.chmod(home.path, 0o777)
    args = ["spawn", "hello", "--as", "run:mine"]
    refused(args, cli(*args), str(home.path))
    assert not (home.runs / "mine").exists()


@pytest.mark.parametrize(
    ("where", "args"),
    [
        ("runs", ["spawn", "hello", "--as", "run:mine"]),
        ("sessions", ["session", "register", "--harness", "file", "--id", "me"]),
        ("runs/h", ["result", "h"]),
    ],
    ids=["runs", "sessions", "run-dir"],
)
def test_a_directory_owned_by_another_user_is_refused(
    home: StateRoot, where: str, args: list[str]
) -> None:
    _populated(home)
    (home.path / "sessions").mkdir(exist_ok=True)
    _chown_tree(home.path / where, NOBODY)
    refused(args, cli(*args), where.split("/")[0])


@pytest.mark.parametrize("mode", [0o777, 0o770], ids=["world-writable", "group-writable"])
def test_a_writable_directory_of_another_user_in_the_root_is_refused(
    home: StateRoot, mode: int
) -> None:
    """runs/ belongs to someone else and is writable to others: anyone could have planted
    a run in it."""
    _populated(home)
    os.chown(home.runs, NOBODY, 0)
    os.chmod(home.runs, mode)
    args = ["ls"]
    refused(args, cli(*args), "runs")


# -- #6 the token file --------------------------------------------------------------------------


def _idle(tmp_path: Path, run_id: str) -> dict[str, object]:
    fifo = make_fifo(tmp_path / f"{run_id}.ready")
    out = tmp_path / f"{run_id}.token"
    recipe = write_recipe(
        tmp_path,
        f"idle-{run_id}",
        {
            "template": 'sh -c \'printf %s "$ACTORS_RUN_TOKEN" > "$2"; echo ready > "$1"; exec sleep 300\' i {f} {o}'
        },
    )
    spawned = actors.spawn(str(recipe), as_=run_id, values={"f": str(fifo), "o": str(out)})
    assert read_fifo_line(fifo) == "ready"
    return spawned


@pytest.mark.parametrize(
    "verb",
    [["kill", "a"], ["cancel", "a", "--grace", "0"], ["message", "run:a", "control.stop"]],
    ids=["kill", "cancel", "control.stop"],
)
def test_a_child_of_another_run_cannot_act_as_a_run_by_reading_its_token_file(
    home: StateRoot, tmp_path: Path, verb: list[str]
) -> None:
    _idle(tmp_path, "a")
    _idle(tmp_path, "b")
    # a command of run b: it runs as the same user and can read runs/a/token
    stolen = (home.run("a").dir / "token").read_text().strip()
    env = {"ACTORS_RUN_ID": "a", "ACTORS_RUN_TOKEN": stolen}
    proc = cli(*verb, env=env)
    assert proc.returncode == 2, (
        f"acting as run:a with its token file worked: {proc.stdout}{proc.stderr}"
    )
    assert actors.status("a")["status"] == "running"


def test_the_run_token_is_stored_nowhere_under_the_root(home: StateRoot, tmp_path: Path) -> None:
    spawned = _idle(tmp_path, "t")
    token = (tmp_path / "t.token").read_text()
    assert len(token) >= 16
    holding = []
    for dirpath, _dirs, files in os.walk(home.path):
        for name in files:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink() and token.encode() in path.read_bytes():
                holding.append(str(path.relative_to(home.path)))
    actors.kill("t")
    finished(spawned)
    assert holding == [], f"the run token is stored in clear in {holding}"

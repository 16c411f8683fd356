"""Issue 17 #2 and #15, beyond the attack cases: a state root is trusted only if it is
yours, and everything actors creates in it is private whatever the umask.

StrictModes, as ssh has it: the root, each of its top directories (runs/, sessions/,
archive/, preserved/, tmp/, cache/) and each run or session directory as it is entered
must be owned by the caller's effective uid and not group- or world-writable; else the
command refuses in one line naming the directory and the fix (exit 2, nothing written).
A root of yours that is merely readable by others (0755) is accepted and tightened to
0700 by the next write. Another user is simulated by chown to uid 65534 (tests run as
root).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import actors
from runtime.core.errors import Refused
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, snapshot, write_recipe
from tests.reliability._attack import NOBODY, wrong_modes
from tests.reliability._checks import assert_clean, refused

ME = os.geteuid()


def _hello(home: StateRoot) -> None:
    proc = cli("spawn", "hello", "--as", "run:h", "--wait")
    assert proc.returncode == 0, proc.stderr


def _session(home: StateRoot, session_id: str = "me") -> None:
    proc = cli("session", "register", "--harness", "file", "--id", session_id)
    assert proc.returncode == 0, proc.stderr


def _refused_untouched(home: StateRoot, args: list[str], *needles: str) -> str:
    before = snapshot(home.path)
    line = refused(args, cli(*args), *needles)
    assert snapshot(home.path) == before, f"actors {' '.join(args)} wrote while refusing"
    return line


# -- the root itself ----------------------------------------------------------------------


def test_the_refusal_of_a_foreign_root_is_one_line_with_the_fix(home: StateRoot) -> None:
    _hello(home)
    os.chown(home.path, NOBODY, NOBODY)
    line = _refused_untouched(home, ["ls"])
    assert line == (
        f"actors: state root {home.path} is owned by uid {NOBODY}, not you (uid {ME}); "
        "use your own ACTORS_HOME"
    )


@pytest.mark.parametrize("mode", [0o775, 0o777, 0o2770, 0o730, 0o702], ids=oct)
@pytest.mark.parametrize(
    "args",
    [
        ["ls"],
        ["spawn", "hello", "--as", "run:mine"],
        ["session", "register", "--harness", "file", "--id", "me"],
        ["message", "run:h", "job.go"],
        ["reconcile"],
    ],
    ids=["ls", "spawn", "register", "message", "reconcile"],
)
def test_a_root_of_yours_writable_by_others_is_refused(
    home: StateRoot, mode: int, args: list[str]
) -> None:
    home.path.mkdir(parents=True)
    os.chmod(home.path, mode)
    line = _refused_untouched(home, args, str(home.path), "writable by others", "chmod go-w")
    assert "Traceback" not in line
    assert not (home.runs / "mine").exists()


def test_a_root_of_yours_readable_by_others_is_used_and_tightened(home: StateRoot) -> None:
    """Decided: 0755 (no one else can write) is accepted, as ssh accepts it; the next
    spawn makes it 0700 again."""
    home.path.mkdir(parents=True)
    os.chmod(home.path, 0o755)
    assert_clean(["ls"], cli("ls"), allowed=(0,))
    _hello(home)
    assert stat.S_IMODE(home.path.stat().st_mode) == 0o700


@pytest.mark.parametrize("owner", [ME, NOBODY], ids=["yours", "another-users"])
def test_a_root_that_is_a_link_is_refused(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: int
) -> None:
    """As spawn always required: the root is a directory, never a link to one."""
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    os.chown(target, owner, owner)
    link = tmp_path / "link-root"
    link.symlink_to(target)
    monkeypatch.setenv("ACTORS_HOME", str(link))
    for args in (["ls"], ["spawn", "hello", "--as", "run:mine"], ["session", "ls"]):
        refused(args, cli(*args), str(link), "symlink")
    assert list(target.iterdir()) == []


def test_the_api_refuses_a_foreign_root_too(home: StateRoot) -> None:
    _hello(home)
    os.chown(home.path, NOBODY, NOBODY)
    before = snapshot(home.path)
    with pytest.raises(Refused, match="not you"):
        actors.runs()
    with pytest.raises(Refused, match="not you"):
        actors.spawn("hello", as_="mine")
    with pytest.raises(Refused, match="not you"):
        actors.status("h", home=str(home.path))
    assert snapshot(home.path) == before


# -- the top directories ------------------------------------------------------------------

TOP = ["runs", "sessions", "archive", "preserved", "tmp", "cache"]


@pytest.mark.parametrize("where", TOP)
@pytest.mark.parametrize("how", ["owned-by-another-user", "world-writable", "group-writable"])
def test_a_top_directory_that_is_not_only_yours_is_refused(
    home: StateRoot, where: str, how: str
) -> None:
    _hello(home)
    target = home.path / where
    target.mkdir(exist_ok=True)
    if how == "owned-by-another-user":
        os.chown(target, NOBODY, NOBODY)
        needle = f"owned by uid {NOBODY}"
    else:
        os.chmod(target, 0o777 if how == "world-writable" else 0o770)
        needle = "writable by others"
    for args in (["ls"], ["spawn", "hello", "--as", "run:mine"], ["status", "h"]):
        _refused_untouched(home, args, f"{where}/ in state root {home.path}", needle)
    assert not (home.runs / "mine").exists()


def test_archive_into_an_archive_of_another_user_is_refused(home: StateRoot) -> None:
    _hello(home)
    home.archive.mkdir()
    os.chown(home.archive, NOBODY, NOBODY)
    _refused_untouched(home, ["archive", "h"], "archive/")
    assert (home.runs / "h").is_dir()


# -- a run directory ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["owned-by-another-user", "world-writable", "group-writable"])
@pytest.mark.parametrize(
    "args",
    [
        ["ls"],
        ["status", "h"],
        ["result", "h"],
        ["tail", "h"],
        ["message", "run:h", "job.go"],
        ["kill", "h"],
        ["archive", "h"],
        ["prune", "h"],
        ["reconcile"],
        ["inspect", "run:h"],
    ],
    ids=lambda a: a[0],
)
def test_a_run_directory_that_is_not_only_yours_is_refused(
    home: StateRoot, how: str, args: list[str]
) -> None:
    _hello(home)
    run_dir = home.runs / "h"
    if how == "owned-by-another-user":
        os.chown(run_dir, NOBODY, NOBODY)
    else:
        os.chmod(run_dir, 0o777 if how == "world-writable" else 0o770)
    _refused_untouched(home, args, "runs/h/")
    assert run_dir.is_dir()


# -- a session directory ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["owned-by-another-user", "world-writable"])
@pytest.mark.parametrize(
    "args",
    [
        ["session", "show", "me"],
        ["session", "ls"],
        ["session", "register", "--harness", "file", "--id", "me"],
        ["session", "forget", "me"],
        ["inbox", "read", "--session", "me"],
        ["flush", "--session", "me"],
        ["spawn", "hello", "--as", "run:mine", "--session", "me"],
    ],
    ids=lambda a: "-".join(a[:2]),
)
def test_a_session_directory_that_is_not_only_yours_is_refused(
    home: StateRoot, how: str, args: list[str]
) -> None:
    _session(home)
    session_dir = home.sessions / "me"
    if how == "owned-by-another-user":
        os.chown(session_dir, NOBODY, NOBODY)
    else:
        os.chmod(session_dir, 0o777)
    _refused_untouched(home, args, "sessions/me/")
    assert not (home.runs / "mine").exists()


# -- modes under a permissive umask -------------------------------------------------------




def test_every_kind_of_file_a_run_makes_is_private_under_umask_000(
    home: StateRoot, tmp_path: Path, umask_000: None
) -> None:
    """Captures (stdout/stderr/both), a parallel group's joined output, logs, run.json,
    token, events, inbox, wake, outbox, room, result, follow-up marker, the session's
    files, index.json, the recipe cache, archive/ and preserved artifacts."""
    artifact = tmp_path / "art.txt"
    recipe = write_recipe(
        tmp_path,
        "kinds",
        {
            "mailbox": {"accepts": ["job.go"], "emits": ["note.x"]},
            "artifacts": {"a": str(artifact)},
            "template": [
                {"template": "sh -c 'echo out; echo err >&2'", "output": "both"},
                {
                    "parallel": True,
                    "template": [
                        {"label": "b1", "template": "echo one"},
                        {"label": "b2", "template": "echo two", "output": "both"},
                    ],
                },
                "sh -c 'actors recv --timeout 30 >/dev/null; "
                f"actors emit note.x hi --deliver followup; echo art > {artifact}'",
            ],
        },
    )
    for args in (
        ["session", "register", "--harness", "file", "--id", "ses"],
        ["spawn", str(recipe), "--as", "run:k", "--session", "ses"],
        ["message", "run:k", "job.go", "x", "--session", "ses"],
        ["message", "room:k", "note.z", "hi", "--session", "ses"],
        ["wait", "k"],
        ["ls"],
        ["reconcile"],
        ["inbox", "read", "--session", "ses"],
        ["spawn", "hello", "--as", "run:h", "--session", "ses", "--wait"],
        ["archive", "h", "--session", "ses"],
        ["prune", "k", "--preserve-artifacts", "--session", "ses"],
    ):
        assert_clean(args, cli(*args), allowed=(0, 1) if args[0] == "wait" else (0,))
    assert list((home.path / "preserved").rglob("*")), "no artifact was preserved"
    assert (home.path / "index.json").exists()
    assert wrong_modes(home.path) == {}


def test_a_run_keeps_its_files_private_under_umask_000_through_the_api(
    home: StateRoot, tmp_path: Path, umask_000: None
) -> None:
    leaf = {"template": "sh -c 'echo out; echo err >&2'", "output": "both"}
    recipe = write_recipe(
        tmp_path,
        "both2",
        {"template": [leaf, {"parallel": True, "template": [leaf, leaf]}, "cat"]},
    )
    summary = finished(actors.spawn(str(recipe), as_="b"))
    assert summary["status"] == "done", summary
    assert len(list(home.run("b").dir.rglob("both.log"))) == 3
    assert list(home.run("b").dir.rglob("node-*.out"))
    assert wrong_modes(home.path) == {}


def _hook(*args: str, data: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", "hook", *args],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_claude_code_hooks_make_private_files_under_umask_000(
    home: StateRoot, tmp_path: Path, umask_000: None
) -> None:
    data = {"session_id": "cc2", "cwd": str(tmp_path)}
    assert _hook("session-start", data=data).returncode == 0
    assert (home.sessions / "cc2" / "wake").is_file()
    assert wrong_modes(home.path) == {}


@pytest.mark.parametrize("name", ["wake", "session.json", "inbox.jsonl"])
def test_a_dangling_link_in_a_session_is_never_created_through(
    home: StateRoot, tmp_path: Path, umask_000: None, name: str
) -> None:
    session_dir = home.sessions / "cc3"
    session_dir.mkdir(parents=True)
    for path in (home.path, home.sessions, session_dir):
        os.chmod(path, 0o700)
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    (session_dir / name).symlink_to(outside)
    _hook("session-start", data={"session_id": "cc3", "cwd": str(tmp_path)})
    assert not outside.exists(), f"a dangling {name} link's target was created"

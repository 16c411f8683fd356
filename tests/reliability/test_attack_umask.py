"""Issue 17 #15: modes and links under a hostile umask.

Under umask 000, `output: both` writes captures/*/both.log 0666 (it is written with
`Path.write_bytes`, which honours the umask, unlike every other state file, created 0600);
`actors hook session-start` creates the target of a dangling sessions/<id>/wake symlink
(outside the root).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import finished, write_recipe
from tests.reliability._attack import wrong_modes


@pytest.mark.parametrize("shape", ["leaf", "in-a-parallel-group"])
def test_output_both_is_private_under_umask_000(
    home: StateRoot, tmp_path: Path, umask_000: None, shape: str
) -> None:
    leaf = {"template": "sh -c 'echo out; echo err >&2'", "output": "both"}
    template = (
        [leaf, "cat"] if shape == "leaf" else [{"parallel": True, "template": [leaf, "true"]}]
    )
    recipe = write_recipe(tmp_path, "both", {"template": template})
    summary = finished(actors.spawn(str(recipe), as_="both"))
    assert summary["status"] == "done", summary
    assert list(home.run("both").dir.rglob("both.log")), "no both.log was written"
    assert wrong_modes(home.path) == {}


def _session_start(session_id: str, wake: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors", "hook", "session-start", "--wake", wake],
        input=json.dumps({"session_id": session_id, "cwd": os.getcwd()}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("wake", ["hook", "watcher"])
def test_session_start_does_not_create_through_a_dangling_link(
    home: StateRoot, tmp_path: Path, umask_000: None, wake: str
) -> None:
    name = "wake"
    session_dir = home.path / "sessions" / "cc1"
    session_dir.mkdir(parents=True)
    os.chmod(home.path, 0o700)
    os.chmod(home.path / "sessions", 0o700)
    os.chmod(session_dir, 0o700)
    outside = tmp_path / "outside" / f"created-by-actors-{name}"
    outside.parent.mkdir()
    (session_dir / name).symlink_to(outside)
    proc = _session_start("cc1", wake)
    assert proc.returncode == 0  # a hook never fails a session start
    assert not outside.exists(), f"the dangling {name} link's target was created outside the root"

"""Issue 17 #6, siblings of test_attack_root_trust's token cases: a run's `token` file is
a verifier, not the token, and nothing a same-user process finds under the state root
lets it act as the run; the run's own processes (which get the token in their
environment) still do."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line, run_token, write_recipe


def _idle(tmp_path: Path, run_id: str) -> Path:
    fifo = make_fifo(tmp_path / f"{run_id}.ready")
    recipe = write_recipe(
        tmp_path,
        f"idle-{run_id}",
        {
            "mailbox": {"accepts": ["job.item"]},
            "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' i {f}",
        },
    )
    spawned = actors.spawn(str(recipe), as_=run_id, values={"f": str(fifo)})
    assert read_fifo_line(fifo) == "ready"
    return Path(str(spawned["state_dir"]))


def test_the_token_file_is_a_sha256_verifier(home: StateRoot, tmp_path: Path) -> None:
    run_dir = _idle(tmp_path, "v")
    content = (run_dir / "token").read_text()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}\n", content), content
    assert stat.S_IMODE(os.lstat(run_dir / "token").st_mode) == 0o600
    token = run_token(run_dir)
    assert token not in content
    inside = {"ACTORS_RUN_ID": "v", "ACTORS_RUN_TOKEN": token}
    assert cli("emit", "note.x", "hi", env=inside).returncode == 0  # the real token works
    assert cli("message", "run:v", "job.item", "1", env=inside).returncode == 0
    assert cli("kill", "v", env=inside).returncode == 0
    assert actors.status("v")["status"] == "killed"


@pytest.mark.parametrize("shape", ["hex", "prefixed-hex-only"])
def test_the_verifier_is_no_token(home: StateRoot, tmp_path: Path, shape: str) -> None:
    """The verifier (or its hex digits alone, a valid-looking token) acts as nobody."""
    run_dir = _idle(tmp_path, "w")
    digest = (run_dir / "token").read_text().strip().split(":", 1)[1]
    presented = digest if shape == "hex" else "sha256" + digest
    proc = cli("kill", "w", env={"ACTORS_RUN_ID": "w", "ACTORS_RUN_TOKEN": presented})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert actors.status("w")["status"] == "running"
    actors.kill("w")


def test_a_clear_token_planted_in_the_token_file_matches_nothing(
    home: StateRoot, tmp_path: Path
) -> None:
    """A token file holding a token in clear (an older version's, or one planted by a
    process that wants a token it knows to work) is refused, not compared."""
    run_dir = _idle(tmp_path, "p")
    planted = "A" * 43
    (run_dir / "token").write_text(planted + "\n")
    proc = cli(
        "cancel", "p", "--grace", "0", env={"ACTORS_RUN_ID": "p", "ACTORS_RUN_TOKEN": planted}
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert actors.status("p")["status"] == "running"
    actors.kill("p")


def test_the_runner_keeps_the_token_out_of_what_it_writes(home: StateRoot, tmp_path: Path) -> None:
    """The token travels spawn -> runner -> commands through the environment only: no
    file of the run (run.json, events, logs, progress) carries it."""
    run_dir = _idle(tmp_path, "q")
    token = run_token(run_dir).encode()
    actors.kill("q")
    leaks = [
        str(path.relative_to(home.path))
        for path in home.path.rglob("*")
        if path.is_file() and not path.is_symlink() and token in path.read_bytes()
    ]
    assert leaks == []

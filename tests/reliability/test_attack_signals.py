"""Issue 17 #1: a signal goes only to a process whose identity is proven this instant.

`actors reconcile`, finding a run's runner dead, SIGKILLs every process of the session id
recorded in run.json. Nothing proves that session still belongs to the run: after pid
reuse it is an unrelated program's, and a run.json can be edited or forged. Each test
puts an unrelated process (started here, outside actors) in the recorded session and
asserts it survives reconcile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.reliability._attack import NOBODY


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, session id, start ticks) of a live pid, None when gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    return rest[0].decode(), int(rest[3]), int(rest[19])


class Victim:
    """An unrelated `sleep` in a session of its own, started outside actors."""

    def __init__(self, pid: int, sid: int) -> None:
        self.pid, self.sid = pid, sid
        stat = _stat(pid)
        assert stat is not None
        self.ticks = stat[2]

    def alive(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat[0] not in ("Z", "X") and stat[2] == self.ticks

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)


@pytest.fixture
def setsid_sleep() -> Iterator[tuple[Victim, subprocess.Popen[bytes]]]:
    """`setsid sleep 300`: its own session, led by itself."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    victim = Victim(proc.pid, proc.pid)
    yield victim, proc
    victim.kill()
    proc.wait()


@pytest.fixture
def orphaned_session() -> Iterator[tuple[Victim, int]]:
    """A session whose leader (sh) has exited and been reaped, and whose member (a
    sleep) lives on: the session id is the dead leader's pid, exactly what a reused or
    recorded runner pid looks like to reconcile."""
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!"],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    out, _ = leader.communicate(timeout=10)
    victim = Victim(int(out.decode().strip()), leader.pid)
    assert _stat(victim.pid)[1] == leader.pid  # type: ignore[index]
    yield victim, leader.pid
    victim.kill()


def _finished_looking_run(home: StateRoot, run_id: str) -> tuple[Path, dict[str, Any]]:
    """A real run that ran to its end, turned into one whose runner is gone without a
    result (what reconcile finishes): its runner pid is dead."""
    proc = cli("spawn", "hello", "--as", f"run:{run_id}", "--wait")
    assert proc.returncode == 0, proc.stderr
    run_dir = home.run(run_id).dir
    for name in ("result.json", "followup.json"):
        (run_dir / name).unlink(missing_ok=True)
    run = json.loads((run_dir / "run.json").read_text())
    finished({"run": run_id, "pid": run["pid"]})  # the runner has exited
    gone = _stat(run["process_identity"]["pid"])
    assert gone is None or gone[0] in ("Z", "X"), "the runner should be gone"
    return run_dir / "run.json", run


def _rewrite(path: Path, run: dict[str, Any]) -> None:
    path.write_text(json.dumps(run))
    os.chmod(path, 0o600)


def _reconcile_then_status(run_id: str) -> str:
    proc = cli("reconcile", "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.xfail(
    reason="issue 17 #1: reconcile SIGKILLs the recorded session of a dead runner without proving it is the run's",
    strict=True,
)
def test_reconcile_spares_an_unrelated_session_named_in_an_edited_run_json(
    home: StateRoot, setsid_sleep: tuple[Victim, subprocess.Popen[bytes]]
) -> None:
    victim, _proc = setsid_sleep
    path, run = _finished_looking_run(home, "edited")
    run["process_identity"]["sid"] = victim.sid  # the runner is dead; the sid is the victim's
    _rewrite(path, run)
    _reconcile_then_status("edited")
    assert victim.alive(), "reconcile killed an unrelated process (setsid sleep)"


@pytest.mark.xfail(
    reason="issue 17 #1: reconcile kills a recycled session id (its leader dead) that now holds an unrelated program",
    strict=True,
)
def test_reconcile_spares_an_unrelated_program_in_a_recycled_session_id(
    home: StateRoot, orphaned_session: tuple[Victim, int]
) -> None:
    """No edit of the session: the runner's own recorded pid and sid are the (dead) pid
    whose session id an unrelated program now holds."""
    victim, dead_leader = orphaned_session
    path, run = _finished_looking_run(home, "recycled")
    identity = run["process_identity"]
    identity.update(pid=dead_leader, pgid=dead_leader, sid=dead_leader)
    _rewrite(path, run)
    _reconcile_then_status("recycled")
    assert victim.alive(), "reconcile killed an unrelated program that reused the session id"


@pytest.mark.xfail(
    reason="issue 17 #1: with no sid recorded, reconcile kills the session named by the dead runner pid",
    strict=True,
)
def test_reconcile_spares_a_session_named_only_by_a_dead_pid(
    home: StateRoot, orphaned_session: tuple[Victim, int]
) -> None:
    victim, dead_leader = orphaned_session
    path, run = _finished_looking_run(home, "nosid")
    run["process_identity"] = {
        k: v for k, v in run["process_identity"].items() if k not in ("sid", "pgid")
    }
    run["process_identity"]["pid"] = dead_leader
    _rewrite(path, run)
    _reconcile_then_status("nosid")
    assert victim.alive(), "reconcile killed the session of a pid it could not prove"


def test_a_run_forged_by_another_user_cannot_aim_the_victims_reconcile(
    home: StateRoot, setsid_sleep: tuple[Victim, subprocess.Popen[bytes]]
) -> None:
    """The state root (or one run directory in it) was written by another user, who put
    the victim's session id in a finished-looking run; the victim runs reconcile."""
    victim, _proc = setsid_sleep
    path, run = _finished_looking_run(home, "forged")
    run["process_identity"]["sid"] = victim.sid
    _rewrite(path, run)
    for dirpath, dirs, files in os.walk(path.parent):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(dirpath, name), NOBODY, NOBODY)
    os.chown(path.parent, NOBODY, NOBODY)
    _reconcile_then_status("forged")
    assert victim.alive(), "a run.json owned by another user aimed reconcile at our process"

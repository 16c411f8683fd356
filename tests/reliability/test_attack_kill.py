"""Issue 26 #3: kill always kills.

A run is the attacker here: it is a program of the user's, and it can rewrite its own
state directory, freeze its runner or leave its process group. Whatever it did, `actors
kill` must leave nothing of it alive, without hanging, and `kill` must need no journal
write to succeed. Each test starts a real run whose own command does the damage, then
kills it through the real CLI, and proves by /proc that every process the run started is
gone (a daemon's pid is written by the daemon itself, to a file outside the root).

Parametrised over the two ways a run's processes are held: a cgroup v2 per run (the
default where one can be made) and `ACTORS_CGROUP=off` (process groups and identity
proofs, the documented fallback). A double-forked daemon escapes the fallback by design
(docs/reliability.md); only the cgroup is asked to catch it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
import runtime.core.faults
from runtime.core import cgroups
from runtime.store.layout import StateRoot
from tests.conftest import (
    cli,
    make_fifo,
    wait_for_change,
    wait_stopped,
    write_recipe,
)

MODES = ["cgroup", "off"]
assert not runtime.core.faults.ARMED  # the fault hook never pauses this process


def _cgroups_here() -> bool:
    return cgroups.parent_dir() is not None


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, home: StateRoot, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "cgroup":
        if not _cgroups_here():
            pytest.skip("no delegated cgroup v2 here (the fallback case covers this machine)")
        monkeypatch.setenv("ACTORS_CGROUP", "auto")
    else:
        monkeypatch.setenv("ACTORS_CGROUP", "off")
    return str(request.param)


def _ticks(pid: int) -> int | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    return None if rest[0] in (b"Z", b"X") else int(rest[19])


class Pids:
    """Processes a run announced (pid lines in files outside the state root)."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.seen: dict[int, int] = {}

    def file(self, name: str) -> Path:
        return self.where / f"{name}.pid"

    def collect(self, *names: str, timeout: float = 30) -> None:
        for name in names:
            path = self.file(name)
            wait_for_change(
                self.where,
                lambda p=path: p.exists() and p.read_text().endswith("\n"),
                timeout,
                what=f"{name} to write its pid",
            )
            pid = int(path.read_text().split()[0])
            ticks = _ticks(pid)
            assert ticks is not None, f"{name} (pid {pid}) ended before it was checked"
            self.seen[pid] = ticks

    def alive(self) -> list[int]:
        return [pid for pid, ticks in self.seen.items() if _ticks(pid) == ticks]

    def reap(self) -> None:
        for pid in self.alive():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Pids]:
    found = Pids(tmp_path)
    yield found
    found.reap()


def _spawn(tmp_path: Path, name: str, script: str, **values: str) -> dict[str, object]:
    """Spawn `sh -c SCRIPT` as a recipe run; SCRIPT gets {pids} (a directory outside the
    root) as $1 and the run's state directory as $ACTORS_STATE_DIR."""
    recipe = write_recipe(tmp_path, name, {"template": f"sh -c '{script}' {name} {{pids}}"})
    proc = cli("spawn", str(recipe), "--as", f"run:{name}", "-v", f"pids={tmp_path}", "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _kill(run: str, *extra: str, bound: float = 30.0) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = cli("kill", run, *extra, timeout=bound)
    took = time.monotonic() - started
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout + proc.stderr, took


def _runner_gone(record: dict[str, object], timeout: float = 15.0) -> None:
    from runtime.core.process import wait_gone

    assert wait_gone([int(str(record["pid"]))], timeout=timeout), "the runner is still alive"


# -- a run that rewrote its own journals ---------------------------------------------------------


@pytest.mark.parametrize(
    "files", [("events.jsonl",), ("events.jsonl", "inbox.jsonl"), ("progress.json", "result.json")]
)
def test_kill_needs_no_journal_write(
    tmp_path: Path, mode: str, pids: Pids, files: tuple[str, ...]
) -> None:
    """The run replaces its own journals with symlinks to a file outside the root; kill
    (with and without --force) still kills it, and nothing is written through the link."""
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    links = "; ".join(
        f'rm -f "$ACTORS_STATE_DIR/{f}"; ln -s {outside} "$ACTORS_STATE_DIR/{f}"' for f in files
    )
    record = _spawn(tmp_path, "linker", f'{links}; echo $$ > "$1/cmd.pid"; exec sleep 300')
    pids.collect("cmd")
    code, text, _ = _kill("linker")
    assert code == 0, text
    assert pids.alive() == [], f"still alive after kill: {pids.alive()}"
    _runner_gone(record)
    assert outside.read_text() == "untouched\n", "a record was written through the planted link"


# -- a run that damaged its run.json ------------------------------------------------------------


@pytest.mark.parametrize("garbage", ["not json", "[]", '{"run": 5}', "[" * 100000 + "]" * 100000])
def test_a_damaged_run_json_is_killed_with_force(
    tmp_path: Path, mode: str, pids: Pids, garbage: str, home: StateRoot
) -> None:
    """Its owner cannot be read, so a plain kill is refused (one line, exit 2, nothing
    signalled); `kill --force` stops it through its cgroup. Without a cgroup the runner
    cannot be proven from a damaged record: refused, nothing signalled (the fallback)."""
    (tmp_path / "garbage").write_text(garbage)
    record = _spawn(
        tmp_path,
        "garbler",
        f'cat {tmp_path}/garbage > "$ACTORS_STATE_DIR/run.json"; echo $$ > "$1/cmd.pid"; exec sleep 300',
    )
    pids.collect("cmd")
    code, text, _ = _kill("garbler")
    assert code == 2 and text.startswith("actors: ") and text.count("\n") == 1, text
    assert "--force" in text
    assert pids.alive(), "a refused kill signalled the run"
    code, text, _ = _kill("garbler", "--force")
    if mode == "off":
        assert code == 2 and "nothing was signalled" in text, text
        assert pids.alive(), "the fallback signalled a process it could not prove"
        pids.reap()
        return
    assert code == 0, text
    assert pids.alive() == [], f"still alive after kill --force: {pids.alive()}"
    _runner_gone(record)


# -- a runner frozen while it holds a lock --------------------------------------------------------


def test_kill_does_not_wait_for_a_frozen_lock_holder(
    tmp_path: Path, mode: str, home: StateRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner is stopped inside its first journal append (events.jsonl's flock held):
    kill finishes well inside its bound and the runner is dead. On 4ee217d it hung on the
    flock (60 s, the CLI's timeout here)."""
    barrier = tmp_path / "barrier"
    monkeypatch.setenv("ACTORS_PAUSE_AT", "files.append.before_write")
    monkeypatch.setenv("ACTORS_PAUSE_FIFO", str(barrier))
    recipe = write_recipe(tmp_path, "frozen", {"template": "sleep 300"})
    # spawned in-process: this process imported the fault hook unarmed, so only the
    # runner (which inherits the environment) stops itself
    record = dict(actors.spawn(str(recipe), as_="frozen"))
    monkeypatch.delenv("ACTORS_PAUSE_AT")
    monkeypatch.delenv("ACTORS_PAUSE_FIFO")
    wait_for_change(
        tmp_path,
        lambda: barrier.exists() and barrier.read_text().endswith("\n"),
        30,
        what="the runner to reach its first journal append",
    )
    runner = int(barrier.read_text().split()[0])
    assert runner == record["pid"]
    wait_stopped(runner)
    code, text, took = _kill("frozen", bound=60)
    assert code == 0, text
    assert took < 20, f"kill took {took:.1f}s with the runner frozen on a lock"
    _runner_gone(record)


# -- processes that left the run's group ----------------------------------------------------------

DAEMONS = {
    "setsid": '(setsid sh -c "echo \\$\\$ > $1/daemon.pid; exec sleep 300" &)',
    "setsid-env-cleared": '(setsid env -i sh -c "echo \\$\\$ > $1/daemon.pid; exec sleep 300" &)',
    "nohup-double-fork": '( (sh -c "echo \\$\\$ > $1/daemon.pid; exec sleep 300" &) &)',
}


@pytest.mark.parametrize("daemon", sorted(DAEMONS))
def test_kill_reaches_a_double_forked_daemon(
    tmp_path: Path, home: StateRoot, pids: Pids, daemon: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _cgroups_here():
        pytest.skip("no delegated cgroup v2 here: a daemon that left the session escapes")
    monkeypatch.setenv("ACTORS_CGROUP", "auto")
    record = _spawn(
        tmp_path, "forker", f'{DAEMONS[daemon]}; echo $$ > "$1/cmd.pid"; exec sleep 300'
    )
    pids.collect("cmd", "daemon")
    code, text, _ = _kill("forker")
    assert code == 0, text
    assert pids.alive() == [], f"still alive after kill: {pids.alive()}"
    _runner_gone(record)
    assert cgroups.groups_of(home.path, "forker") == [], "the run's cgroup was left behind"


@pytest.mark.parametrize("daemon", sorted(DAEMONS))
def test_a_run_that_ends_leaves_no_daemon(
    tmp_path: Path, home: StateRoot, pids: Pids, daemon: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No descendant outlives its run, even one that left the run's session."""
    if not _cgroups_here():
        pytest.skip("no delegated cgroup v2 here: a daemon that left the session escapes")
    monkeypatch.setenv("ACTORS_CGROUP", "auto")
    go = make_fifo(tmp_path / "go")
    record = _spawn(tmp_path, "quitter", f"{DAEMONS[daemon]}; read x < {go}")
    pids.collect("daemon")
    with open(go, "w") as gate:  # the command ends only once the daemon is seen alive
        gate.write("go\n")
    proc = cli("wait", "quitter", "--timeout", "60")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _runner_gone(record)
    assert pids.alive() == [], f"a daemon outlived its run: {pids.alive()}"


def test_cancel_reaches_a_daemon_too(
    tmp_path: Path, home: StateRoot, pids: Pids, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _cgroups_here():
        pytest.skip("no delegated cgroup v2 here: a daemon that left the session escapes")
    monkeypatch.setenv("ACTORS_CGROUP", "auto")
    record = _spawn(
        tmp_path, "canceller", f'{DAEMONS["setsid"]}; echo $$ > "$1/cmd.pid"; exec sleep 300'
    )
    pids.collect("cmd", "daemon")
    proc = cli("cancel", "canceller", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert pids.alive() == [], f"still alive after cancel: {pids.alive()}"
    _runner_gone(record)


# -- a kill's record is honest about what it could write -----------------------------------------


def test_status_after_a_kill_through_damage_is_killed(
    tmp_path: Path, mode: str, pids: Pids, home: StateRoot
) -> None:
    """With events.jsonl a symlink the kill cannot journal run.kill, yet status says
    killed (result.json and stop.json were written beside it)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    _spawn(
        tmp_path,
        "honest",
        f'rm -f "$ACTORS_STATE_DIR/events.jsonl"; ln -s {outside} "$ACTORS_STATE_DIR/events.jsonl"; '
        'echo $$ > "$1/cmd.pid"; exec sleep 300',
    )
    pids.collect("cmd")
    code, text, _ = _kill("honest")
    assert code == 0, text
    proc = cli("status", "honest", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "killed"


def test_a_run_spawned_by_the_last_command_of_another_outlives_it(
    tmp_path: Path, home: StateRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's end stops every process of its cgroup; a run it spawned is not one of
    them, even when its runner was started the instant before the parent ended (spawn
    moves the new runner into its own cgroup before it returns)."""
    if not _cgroups_here():
        pytest.skip("no delegated cgroup v2 here")
    monkeypatch.setenv("ACTORS_CGROUP", "auto")
    barrier = tmp_path / "barrier"
    # the kid's runner stops itself before it moves into its own cgroup: the parent ends
    # (and sweeps its cgroup) while the kid's runner is still in it
    armed = f"ACTORS_PAUSE_AT=runner.before_cgroup ACTORS_PAUSE_FIFO={barrier}"
    recipe = write_recipe(
        tmp_path,
        "spawner",
        {"template": f"env {armed} actors spawn -t 'sleep 300' --as run:kid"},
    )
    proc = cli("spawn", str(recipe), "--as", "run:spawner", "--wait", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wait_for_change(
        tmp_path,
        lambda: barrier.exists() and barrier.read_text().endswith("\n"),
        30,
        what="the kid's runner to stop before its cgroup",
    )
    kid_runner = int(barrier.read_text().split()[0])
    from runtime.core.process import wait_gone

    assert wait_gone([int(json.loads(home.run("spawner").run_json.read_text())["pid"])], 30)
    os.kill(kid_runner, signal.SIGCONT)  # the parent is gone: the kid goes on
    wait_for_change(
        home.run("kid").dir,
        lambda: '"run.runner.start"' in home.run("kid").events.read_text(),
        30,
        what="the kid's runner to start",
    )
    kid = json.loads(cli("status", "kid", "--json").stdout)
    assert kid["status"] == "running", kid
    code, text, _ = _kill("kid", "--force")  # it belongs to run:spawner
    assert code == 0, text

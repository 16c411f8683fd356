"""Issue 17 #3: nothing under the state root is followed through a symlink (no read,
write, rename, truncate, chmod or delete).

A canary file and directory live outside the root, with recorded content, mode and mtime
(the file and the directory's entry are 40 days old, what a sweep deletes). A symlink to
them is planted at a documented path (docs/state-files.md) at some stage of a run's life;
then the operation of that stage runs through the real CLI. Whatever it does, nothing
outside the root may change, the canary's content may not be printed, and the operation
either succeeds without following the link or fails cleanly (exit 2, one `actors:` line,
no traceback).

The explicit tests are the instances found; `test_every_*_path` plant at each documented
path once (stages and kinds in turn), the slow tier at every path x stage x kind, and the
hypothesis properties draw further combinations.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import actors
import runtime.core.faults
from runtime.store.layout import StateRoot
from tests.conftest import (
    _reap_runs,
    cli,
    isolate,
    make_fifo,
    read_fifo_line,
    wait_for_change,
    wait_stopped,
    write_recipe,
)
from tests.reliability._attack import Canary, clean_or_refused, plant

# This process imported the fault hook before any test armed the environment (the
# spawn below sets it only for the runner it starts): it never pauses itself.
assert not runtime.core.faults.ARMED

SESSION = "ses"
REPORT_TEXT = b"report body\n"
REPORT_DIGEST = hashlib.sha256(REPORT_TEXT).hexdigest()[:8]


class World:
    """A fresh state root, a canary outside it, and a gated run: its first command
    waits on a FIFO; then a parallel group prints, writes its artifact and emits."""

    def __init__(self, base: Path, mp: pytest.MonkeyPatch) -> None:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        self.base = base
        self.root = base / "state"
        isolate(mp, base, self.root)
        mp.setenv("ACTORS_KILL_GRACE", "2")
        self.canary = Canary(base / "outside")
        self.report = base / "report.txt"
        self.recipe = write_recipe(
            base,
            "gated",
            {
                "mailbox": {"accepts": ["job.go"]},
                "artifacts": {"report": "{rep}"},
                "template": [
                    'sh -c \'echo ready > "$1"; read x < "$2"\' g {r} {g}',
                    {
                        "parallel": True,
                        "template": [
                            'sh -c \'echo OUT-LINE; printf "report body\\n" > "$1"\' a {rep}',
                            "sh -c 'echo ERR-LINE >&2; env -u ACTORS_PAUSE_AT actors emit note.x hi --to room' b",
                        ],
                    },
                ],
            },
        )
        self.run_id = ""
        self.runner_pid = 0
        self.go: Path | None = None
        self.outputs = ""
        self.aborted = False

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / self.run_id

    def start(self, run_id: str = "victim", before_first_command: Any = None) -> None:
        """Spawn the gated run. With `before_first_command` (a callable), the runner is
        held by the fault hook at its first journal append, before any command (and any
        log file) is opened, and the callable runs then."""
        ready = make_fifo(self.base / f"{run_id}.ready")
        self.go = self.base / f"{run_id}.go"
        make_fifo(self.go)
        barrier = self.base / f"{run_id}.barrier"
        armed = {"ACTORS_PAUSE_AT": "files.append.before_write", "ACTORS_PAUSE_FIFO": str(barrier)}
        if before_first_command is not None:
            os.environ.update(armed)  # a plain-file barrier: spawn itself may wait for the runner
        try:
            record = actors.spawn(
                str(self.recipe),
                as_=run_id,
                session=SESSION,
                values={"r": str(ready), "g": str(self.go), "rep": str(self.report)},
            )
        finally:
            for key in armed:
                os.environ.pop(key, None)
        self.run_id = run_id
        if before_first_command is not None:
            wait_for_change(
                self.base, lambda: barrier.exists() and barrier.read_text().endswith("\n")
            )
            pid = int(barrier.read_text().split()[0])
            wait_stopped(pid)
            before_first_command()
            os.kill(pid, signal.SIGCONT)
        self.runner_pid = int(record["pid"])
        self.aborted = not _ready_or_ended(ready, self.runner_pid)

    def finish(self) -> None:
        if self.aborted:  # the runner refused its state and ended before any command
            self.wait()
            return
        assert self.go is not None
        _release_or_ended(self.go, self.runner_pid)
        self.wait()

    def wait(self) -> None:
        proc = cli("wait", self.run_id, "--timeout", "60")
        assert "Traceback" not in proc.stderr and proc.returncode != 75, proc.stderr

    def op(self, args: list[str], *, allowed_codes: bool = False) -> None:
        proc = cli(*args, env={"ACTORS_SESSION": SESSION})
        self.outputs += proc.stdout + proc.stderr
        if not allowed_codes:
            problem = clean_or_refused(args, proc)
            assert problem is None, problem
        else:
            assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (
                proc.stderr
            )

    def target(self, kind: str) -> Path:
        return self.canary.dir if kind == "dir" else self.canary.file

    def check(self) -> None:
        assert self.canary.untouched(), f"outside the root changed: {self.canary.diff()}"
        assert "CANARY-CONTENT" not in self.outputs, "the canary's content was read and shown"
        assert '"canary": true' not in self.outputs, "the canary directory was read and shown"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    made = World(tmp_path / "w", monkeypatch)
    yield made
    _reap_runs(StateRoot(made.root))


# -- the instances of the issue ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "stdout.log",
        "stderr.log",
        "captures/command-002/stdout.log",
        "captures/command-003/stderr.log",
        "captures/node-1.2.out",
    ],
)
def test_a_planted_output_file_is_not_written_through(world: World, path: str) -> None:
    world.start(before_first_command=lambda: plant(world.run_dir / path, world.canary.file))
    world.finish()
    world.op(["status", world.run_id])
    world.check()


def test_a_planted_preserved_copy_is_not_written_through(world: World) -> None:
    world.start()
    world.finish()
    dest = world.root / "preserved" / world.run_id / f"report-{REPORT_DIGEST}--report.txt"
    plant(dest, world.canary.file)
    world.op(["prune", world.run_id, "--preserve-artifacts"])
    world.check()


def test_a_planted_control_fifo_is_not_written_through(tmp_path: Path, world: World) -> None:
    ready = make_fifo(tmp_path / "fifo.ready")
    recipe = write_recipe(
        tmp_path,
        "fifo-ep",
        {
            "mailbox": {"accepts": ["job.go"], "endpoint": "fifo"},
            "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' f {r}",
        },
    )
    actors.spawn(str(recipe), as_="fep", session=SESSION, values={"r": str(ready)})
    assert read_fifo_line(ready) == "ready"
    world.run_id = "fep"
    plant(world.run_dir / "control.fifo", world.canary.file)
    proc = cli("message", "run:fep", "job.go", "hello", "--session", SESSION)
    world.outputs += proc.stdout
    assert "state=sent" not in proc.stdout, "reported sent through a planted symlink"
    cli("kill", "fep", "--session", SESSION)
    world.check()


@pytest.mark.parametrize("path", ["cache/recipes"])
def test_the_sweep_does_not_delete_through_a_symlinked_directory(world: World, path: str) -> None:
    plant(world.root / path, world.canary.dir)
    world.op(["spawn", "hello", "--as", "run:swept", "--wait"], allowed_codes=True)
    world.check()


# -- every documented path at every stage (hypothesis) -------------------------------------------

RUN_FILES = [
    "run.json",
    "stdout.log",
    "stderr.log",
    "runner.log",
    "events.jsonl",
    "progress.json",
    "result.json",
    "followup.json",
    "communication.json",
    "token",
    "inbox.jsonl",
    ".inbox.jsonl.lock",
    "wake.jsonl",
    "outbox.jsonl",
    "captures/command-002/stdout.log",
    "captures/command-003/stderr.log",
    "captures/node-1.2.out",
    "rooms/main/messages.jsonl",
    "branches/b1/inbox.jsonl",
    "branches/b1/.inbox.jsonl.lock",
    "control.fifo",
]
RUN_DIRS = [
    "doorbells",
    "captures",
    "captures/command-002",
    "rooms",
    "rooms/main",
    "rooms/main/doorbells",
    "branches",
    "branches/b1",
    "branches/b1/doorbells",
]
RUN_STAGES = ["running", "message", "result", "tail", "archive", "prune", "reconcile"]


def _run_stage(world: World, stage: str, path: str, kind: str) -> None:
    world.run_id = "victim"
    link = world.run_dir / path
    if stage == "running":
        world.start(before_first_command=lambda: plant(link, world.target(kind)))
        world.finish()
        world.op(["status", world.run_id])
        return
    world.start()
    if stage == "message":
        plant(link, world.target(kind))
        if stage == "message":
            world.op(["message", f"run:{world.run_id}", "job.go", "x"])
            world.op(["message", f"branch:{world.run_id}/b1", "job.go", "y"])
            world.op(["message", f"room:{world.run_id}", "note.y", "z"])
        world.finish()
        world.op(["status", world.run_id])
        return
    world.finish()
    plant(link, world.target(kind))
    if stage == "result":
        world.op(["result", world.run_id])
        world.op(["result", world.run_id, "--json"])
        world.op(["inspect", f"run:{world.run_id}", "--view", "files"])
        world.op(["inspect", f"run:{world.run_id}", "--view", "messages"])
    elif stage == "tail":
        for extra in ([], ["--stderr"], ["--events"]):
            world.op(["tail", world.run_id, *extra])
    elif stage == "archive":
        world.op(["archive", world.run_id])
        world.op(["ls"])
    elif stage == "prune":
        world.op(["prune", world.run_id, "--preserve-artifacts"])
    elif stage == "reconcile":
        (world.run_dir / "followup.json").unlink(missing_ok=True)
        world.op(["reconcile"])


@pytest.mark.timeout(600)  # 20+ examples, each a spawn and several CLI calls
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(
    path=st.sampled_from(RUN_FILES + RUN_DIRS),
    stage=st.sampled_from(RUN_STAGES),
    kind=st.sampled_from(["file", "dir"]),
)
@example(path="stdout.log", stage="running", kind="file")
def test_no_run_path_is_followed_at_any_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    with monkeypatch.context() as mp:
        world = World(tmp_path / "h", mp)
        try:
            _run_stage(world, stage, path, kind)
            world.check()
        finally:
            _reap(world)


ROOT_PATHS = [
    "runs",
    "sessions",
    f"sessions/{SESSION}",
    f"sessions/{SESSION}/doorbells",
    "archive/victim",
    "preserved/victim",
    "index.json",
    ".index.lock",
    "cache/recipes",
    "cache",
    "tmp",
    "archive",
    "preserved",
    f"preserved/victim/report-{REPORT_DIGEST}--report.txt",
    f"sessions/{SESSION}/inbox.jsonl",
    f"sessions/{SESSION}/deliveries.jsonl",
    f"sessions/{SESSION}/wake",
    f"sessions/{SESSION}/session.json",
    f"sessions/{SESSION}/bodies",
    f"sessions/{SESSION}/.inbox.lock",
    f"sessions/{SESSION}/.deliver.lock",
    f"sessions/{SESSION}/.session.lock",
]
ROOT_STAGES = ["spawn", "finish", "archive", "prune", "session", "reconcile"]


def _root_stage(world: World, stage: str, path: str, kind: str) -> None:
    link = world.root / path
    if stage == "spawn":
        world.root.mkdir(parents=True, exist_ok=True)
        os.chmod(world.root, 0o700)
        plant(link, world.target(kind))
        world.op(["spawn", "hello", "--as", "run:h", "--wait"], allowed_codes=True)
        world.op(["ls"])
        return
    world.start()
    if stage == "finish":
        plant(link, world.target(kind))
        world.finish()
        world.op(["ls"])
        world.op(["inbox", "read", "--session", SESSION])
        return
    world.finish()
    plant(link, world.target(kind))
    if stage == "archive":
        world.op(["archive", world.run_id])
    elif stage == "prune":
        world.op(["prune", world.run_id, "--preserve-artifacts"])
    elif stage == "session":
        world.op(["session", "ls", "--json"])
        world.op(["session", "show", SESSION])
        world.op(["inbox", "read", "--session", SESSION])
        world.op(["flush", "--session", SESSION])
        world.op(["session", "register", "--harness", "file", "--id", SESSION])
    elif stage == "reconcile":
        if world.run_dir.is_dir():  # not when runs/ itself is the planted link
            (world.run_dir / "followup.json").unlink(missing_ok=True)
        world.op(["reconcile"])
        world.op(["ls", "--json"])


@pytest.mark.timeout(600)  # 20+ examples, each a spawn and several CLI calls
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(
    path=st.sampled_from(ROOT_PATHS),
    stage=st.sampled_from(ROOT_STAGES),
    kind=st.sampled_from(["file", "dir"]),
)
@example(path="cache/recipes", stage="spawn", kind="dir")
@example(path=f"preserved/victim/report-{REPORT_DIGEST}--report.txt", stage="prune", kind="file")
def test_no_root_path_is_followed_at_any_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    with monkeypatch.context() as mp:
        world = World(tmp_path / "h", mp)
        try:
            _root_stage(world, stage, path, kind)
            world.check()
        finally:
            _reap(world)


# -- the cases found by hand, and every path once (normal tier) or at every stage (slow) ---------


@pytest.mark.parametrize(
    ("path", "stage", "kind"),
    [
        ("stderr.log", "running", "file"),
        ("captures", "running", "dir"),
        ("rooms", "running", "dir"),
        ("rooms", "message", "dir"),
        ("runner.log", "running", "file"),
    ],
)
def test_hand_found_run_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_run_case(tmp_path, monkeypatch, path, stage, kind)


@pytest.mark.parametrize(
    ("path", "stage", "kind"),
    [
        ("preserved", "prune", "dir"),
        (f"sessions/{SESSION}/.inbox.lock", "session", "file"),
        (f"sessions/{SESSION}/.inbox.lock", "finish", "file"),
        (f"sessions/{SESSION}/.session.lock", "session", "file"),
        (f"sessions/{SESSION}/.session.lock", "session", "dir"),
        ("tmp", "spawn", "dir"),
        ("cache", "spawn", "dir"),
    ],
)
def test_hand_found_root_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_root_case(tmp_path, monkeypatch, path, stage, kind)


def _rotation(paths: list[str], stages: list[str]) -> list[tuple[str, str, str]]:
    """Every path once, the stages and kinds taken in turn (so each stage is met too)."""
    return [(p, stages[i % len(stages)], "file" if i % 2 else "dir") for i, p in enumerate(paths)]


def _matrix(paths: list[str], stages: list[str]) -> list[tuple[str, str, str]]:
    return [(p, st, k) for p in paths for st in stages for k in ("file", "dir")]


@pytest.mark.parametrize(("path", "stage", "kind"), _rotation(RUN_FILES + RUN_DIRS, RUN_STAGES))
def test_every_run_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_run_case(tmp_path, monkeypatch, path, stage, kind)


@pytest.mark.parametrize(("path", "stage", "kind"), _rotation(ROOT_PATHS, ROOT_STAGES))
def test_every_root_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_root_case(tmp_path, monkeypatch, path, stage, kind)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "stage", "kind"), _matrix(RUN_FILES + RUN_DIRS, RUN_STAGES))
def test_every_run_path_at_every_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_run_case(tmp_path, monkeypatch, path, stage, kind)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "stage", "kind"), _matrix(ROOT_PATHS, ROOT_STAGES))
def test_every_root_path_at_every_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    _one_root_case(tmp_path, monkeypatch, path, stage, kind)


def _one_run_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    with monkeypatch.context() as mp:
        world = World(tmp_path / "h", mp)
        try:
            _run_stage(world, stage, path, kind)
            world.check()
        finally:
            _reap(world)


def _one_root_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, stage: str, kind: str
) -> None:
    with monkeypatch.context() as mp:
        world = World(tmp_path / "h", mp)
        try:
            _root_stage(world, stage, path, kind)
            world.check()
        finally:
            _reap(world)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in (b"Z", b"X")


def _ready_or_ended(ready: Path, runner_pid: int, timeout: float = 60.0) -> bool:
    """True once the gated command said `ready` on its FIFO; False if the run ended
    first (a runner that refused a planted file fails cleanly, before any command)."""
    import select

    fd = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0] and os.read(fd, 64):
                return True
            if _gone(runner_pid):
                return select.select([fd], [], [], 0)[0] != [] and bool(os.read(fd, 64))
        raise TimeoutError(f"runner {runner_pid} neither got its command ready nor ended")
    finally:
        os.close(fd)


def _release_or_ended(go: Path, runner_pid: int, timeout: float = 60.0) -> None:
    """Let the gated command go on; but a runner that refused a planted file may have
    stopped its command between `ready` and opening `go`: then nobody will read it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if _gone(runner_pid):
                return
            assert time.monotonic() < deadline, "the gated command never read its go FIFO"
            # No event tells a writer that a reader has attached to a FIFO, and a
            # blocking open would hang for good once the runner has ended: poll briefly.
            time.sleep(0.005)
            continue
        try:
            os.write(fd, b"go\n")
        except BrokenPipeError:
            # The command had opened `go` and was stopped before reading it: the runner
            # refused the planted file. What it left behind is judged by the caller.
            pass
        finally:
            os.close(fd)
        return




def _reap(world: World) -> None:
    """Kill what a failed example left running (by the CLI, as the owner)."""
    for planted in ("runs", "sessions"):  # a planted link there: the test's own, removed
        if (world.root / planted).is_symlink():
            (world.root / planted).unlink()
    if world.run_id and world.run_dir.exists():
        cli("kill", world.run_id, "--session", SESSION)
    _reap_runs(StateRoot(world.root))


_ = (Any, sys)

"""Attack: no fault short of losing the disk loses an outcome (issue 26, class 4).

Real faults only, made for each test and undone after it:
- a full disk: the state root on a small tmpfs, every free page taken by a filler file;
- a read-only root: the same tree bind-mounted read-only (`mount -o remount,ro,bind`);
- no descriptor left: the CLI runs in a child forked from a warm interpreter whose
  descriptor table was filled up to a lowered RLIMIT_NOFILE (a few slots left free, so a
  command runs out in the middle of its work, not before it starts);
- no memory left: the same child with RLIMIT_AS at its size when the command starts;
- stdout that cannot be written: /dev/full;
- no inotify instance left: a user namespace whose `max_inotify_instances` is 0 (per
  namespace, so nothing else on the machine is affected);
- a live server (`actors mcp`, `actors dashboard`) whose RLIMIT_NOFILE is lowered
  under it with prlimit(2), then restored.

Each verb under each fault exits 0, or exits 2 with one `actors: ...` line naming what
ran out (never a traceback, never "internal error"), and a refusal changes nothing. A
run whose disk is full while its command ends waits, says so in runner.log, and ends
`done` with its output and exactly one follow-up once space is freed; a runner that
dies after its command ended is folded from what events.jsonl proves. Follow-ups are
marked read only once they were written out.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import (
    _reap_runs,
    cli,
    finished,
    make_fifo,
    read_fifo_line,
    run_token,
    runner_mode,
    wake_ups,
    write_recipe,
)
from tests.reliability._checks import describe, journals_parse
from tests.reliability._report import record

SUITE = "faults"
PAGE = 4096
ONE_LINE_NEEDLES = {
    "full": ("No space left on device",),
    "read-only": ("Read-only file system",),
    "descriptors": ("Too many open files",),
    "memory": ("out of memory", "Cannot allocate memory"),
    "stdout": ("No space left on device",),
}


# -- the machine: a small file system, mounted and unmounted for the test ----------------


def _mount_tmpfs(where: Path, size: str = "2m") -> bool:
    where.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        return (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                capture_output=True,
                check=False,
            ).returncode
            == 0
        )
    return False


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: StateRoot) -> Iterator[StateRoot]:
    """A state root on a 2 MiB tmpfs of its own (skipped where nothing can be mounted)."""
    mount = tmp_path / "tiny"
    if not _mount_tmpfs(mount):
        pytest.skip("needs to mount a tmpfs (root)")
    root = StateRoot(mount / "state")
    monkeypatch.setenv("ACTORS_HOME", str(root.path))
    try:
        yield root
    finally:
        filler(root).unlink(missing_ok=True)
        _reap_runs(root)  # nothing may keep the mount busy
        subprocess.run(["umount", "-l", str(mount)], check=False)


def filler(root: StateRoot) -> Path:
    return root.path.parent / "filler"


def fill(root: StateRoot) -> None:
    """Take every free page of the file system."""
    fd = os.open(filler(root), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * (16 * PAGE))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        while True:  # the last pages one at a time
            try:
                os.write(fd, b"\0" * PAGE)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return
    finally:
        os.close(fd)


def pad_to_page(path: Path) -> None:
    """Append one valid record (no `event`, so no reader acts on it) so that the file
    ends exactly at a page boundary: its next line needs a new page."""
    size = path.stat().st_size if path.exists() else 0
    need = (PAGE - size % PAGE) % PAGE
    if need < 16:
        need += PAGE
    with open(path, "a") as handle:
        handle.write('{"pad":"' + "x" * (need - len('{"pad":""}\n')) + '"}\n')
    assert path.stat().st_size % PAGE == 0


@contextlib.contextmanager
def read_only(root: StateRoot, where: Path) -> Iterator[StateRoot]:
    """The same state root, seen read-only at `where` (a bind mount, remounted ro)."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(root.path.parent), str(where)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(where)], check=True)
        yield StateRoot(where / root.path.name)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# -- a world to act on: a session, a finished run, a live one, a tool --------------------


def world(root: StateRoot, tmp_path: Path) -> dict[str, str]:
    """A registered session `s1` (file inbox, its follow-up unread), a finished run, an
    idle run, and a registered tool `hello`."""
    assert cli("session", "register", "--harness", "file", "--id", "s1").returncode == 0
    done = actors.spawn(template="echo finished", session="s1")
    assert finished(done)["status"] == "done"
    fifo = make_fifo(tmp_path / "idle.ready")
    recipe = write_recipe(
        tmp_path,
        "idle",
        {
            "mailbox": {"accepts": ["job.item"]},
            "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' x {f}",
        },
    )
    idle = actors.spawn(str(recipe), values={"f": str(fifo)}, session="s1")
    assert read_fifo_line(fifo) == "ready"
    assert cli("tools", "register", "hello", "-t", "echo hi").returncode == 0
    assert len(SessionInbox(session_paths(root, "s1")).unread()) == 1
    return {"done": str(done["run"]), "run": str(idle["run"])}


VERBS: tuple[tuple[str, ...], ...] = (
    ("ls",),
    ("ls", "--json"),
    ("status", "{run}"),
    ("status", "--line", "--session", "s1"),
    ("tail", "{done}"),
    ("tail", "{done}", "--events"),
    ("result", "{done}"),
    ("wait", "{done}"),
    ("inspect", "run:{run}"),
    ("inspect", "run:{done}", "--view", "messages"),
    ("session", "ls"),
    ("session", "show", "s1"),
    ("inbox", "read", "--session", "s1"),
    ("inbox", "read", "--session", "s1", "--peek"),
    ("inbox", "wait", "--session", "s1", "--timeout", "0.3"),
    ("recipes",),
    ("tools",),
    ("metrics",),
    ("completion", "bash"),
    ("spawn", "-t", "true"),
    ("run", "hello"),
    ("message", "run:{run}", "job.item", "x"),
    ("emit", "note.x", "hi"),
    ("recv", "--timeout", "0.2"),
    ("session", "register", "--harness", "file", "--id", "s2"),
    ("tools", "register", "bye", "-t", "echo bye"),
    ("flush", "--session", "s1"),
    ("reconcile",),
    ("watch", "--timeout", "0.3"),
    ("doctor", "delivery", "--session", "s1"),
    ("cancel", "{run}", "--grace", "0.2"),
    ("kill", "{run}"),
    ("archive", "{done}"),
    ("prune", "{done}"),
    ("session", "forget", "s1"),
)
"""Every verb of the command table with a state root to act on (`dashboard`, `mcp` and
`hook` have tests of their own; `install` writes harness files, not the state root).
Destructive ones last, so the others find what they act on."""

READERS = {"ls", "status", "tail", "result", "wait", "inspect", "session ls", "session show",
           "inbox", "recipes", "tools", "metrics", "completion", "recv"}  # fmt: skip
"""Verbs whose first job is their output (the writers' output is their id or a line)."""

MUST_WRITE = {"spawn", "run", "message", "emit", "session register", "doctor delivery"}
"""Verbs that cannot succeed without writing under the state root: a full or read-only
root refuses them (exit 2)."""


SEVERAL_DELIVERIES = {"doctor delivery"}
"""A probe of real deliveries: once its first one is durable (the disk had room for that
line) it is a delivery like any other, kept; the disk filling under the next one is
still one line and exit 2."""


def _argv(verb: Sequence[str], ids: dict[str, str]) -> list[str]:
    return [word.format(**ids) for word in verb]


def _name(verb: Sequence[str]) -> str:
    return " ".join(verb[:2]) if verb[0] in ("session", "tools", "doctor") else verb[0]


def _in_run(root: StateRoot, ids: dict[str, str]) -> dict[str, str]:
    """What `emit` and `recv` need: the environment of a process of the idle run."""
    return {
        "ACTORS_RUN_ID": ids["run"],
        "ACTORS_RUN_TOKEN": ids["token"],
        "ACTORS_STATE_DIR": str(root.run(ids["run"]).dir),
    }


def state_of(root: Path) -> dict[str, bytes]:
    """Every file under the root with its content, but the rebuildable caches (index.json,
    cache/), the lock files (empty sidecars any reader may create), the staging area
    tmp/ (a spawn out of descriptors cannot always remove its staging directory: that
    takes descriptors too; every spawn sweeps it) and the filler. A session inbox counts
    by what it says (each entry's state): a reader that took its follow-ups and gave
    them back unread has changed nothing."""
    from runtime.store.reads import fold, read_jsonl

    out = {}
    for path in sorted(root.rglob("*")):
        name = path.name
        if (
            path.is_symlink()
            or not path.is_file()
            or name.endswith(".lock")
            or name.startswith("index.json")
            or path.relative_to(root).parts[0] in ("cache", "tmp")
        ):
            continue
        if name == "inbox.jsonl" and path.parent.parent.name == "sessions":
            states = {i: e.get("state") for i, e in fold(read_jsonl(path).records).items()}
            out[str(path.relative_to(root))] = json.dumps(states, sort_keys=True).encode()
            continue
        out[str(path.relative_to(root))] = path.read_bytes()
    return out


def dirs_of(root: Path) -> set[str]:
    """Every directory of a run or a session but the doorbell ones (rendezvous points of
    FIFOs, no state); the root's own top directories (runs/, archive/, ...) are its
    layout, which any command may lay down."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_dir()
        and p.name not in ("doorbells", "guardians")
        and len(p.relative_to(root).parts) > 1
        and p.relative_to(root).parts[0] not in ("tmp", "cache")
    }


# -- the CLI in a forked child: its own descriptor table, stdout and environment ---------

_FORKS = r"""
import importlib, json, os, resource, sys, traceback
import actors.cli
for target in {v.split(":")[0] for v in actors.cli.COMMANDS.values()} | {
    "runtime.compiler.model", "runtime.runs.spawn", "runtime.routing.router",
    "runtime.views.inspect", "runtime.runs.reconcile", "runtime.delivery.engine",
    "adapters.file", "watchfiles", "runtime.core.process", "runtime.views.index",
}:
    importlib.import_module(target)  # loaded before the table is filled
free, memory = int(sys.argv[1]), sys.argv[2] == "memory"
if free >= 0:  # fill the descriptor table: `free` slots left, and 3 the child takes
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    for fd in held[: free + 3]:
        os.close(fd)
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(null, 0); os.dup2(out, 1); os.dup2(err, 2)
            if free < 0:  # else kept open: exactly `free` slots left for the command
                for fd in (null, out, err):
                    os.close(fd)
            sys.stdin = open(0, closefd=False)
            os.environ.clear(); os.environ.update(job["env"])
            os.chdir(job["cwd"])
            if memory:  # no more address space than the child has now
                with open("/proc/self/status") as status:
                    vm = next(int(l.split()[1]) for l in status if l.startswith("VmSize"))
                # to sweep (`left`): 64 MiB more, filled first with chunks malloc maps on
                # their own (given back last: freeing one unmaps it, so the larger steps
                # return address space a new arena or mapping can take, not only heap)
                room = 0 if job.get("left") is None else 64 << 20
                resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + room, vm * 1024 + room))
                if job.get("left") is not None:  # fill what is free, then give back `left`
                    held = []
                    for size in (1 << 18, 1 << 16, 1 << 10, 64):
                        try:
                            while True:
                                held.append(bytearray(size))
                        except MemoryError:
                            pass
                    given = 0
                    while held and given < job["left"]:
                        given += len(held.pop())
            sys.argv = ["actors", *job["args"]]
            try:
                actors.cli.main(job["args"])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush(); sys.stderr.flush()
            except BaseException:
                pass
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(json.dumps(code), flush=True)
"""


class Forks:
    """A warm interpreter forking one child per CLI call (the real `actors.cli.main`),
    with `free` descriptor slots left in the child (-1: no limit), with (`memory`) no
    address space beyond what it has when the command starts, and stdout to a file or
    to /dev/full."""

    def __init__(self, tmp: Path, free: int = -1, *, memory: bool = False) -> None:
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _FORKS, str(free), "memory" if memory else "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
        assert self._readline(60) == "ready"
        self.count = 0

    def _readline(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no answer from the forking interpreter in {timeout}s"
        return self.proc.stdout.readline().strip()

    def run(
        self,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        stdout: str | None = None,
        left: int | None = None,
    ) -> subprocess.CompletedProcess[str]:
        self.count += 1
        out = self.tmp / f"fork-{self.count}.out"
        err = self.tmp / f"fork-{self.count}.err"
        job = {
            "args": list(args),
            "env": dict(os.environ, **(env or {})),
            "cwd": os.getcwd(),
            "out": stdout or str(out),
            "err": str(err),
            "left": left,  # memory: bytes left free in the child's full heap (None: as is)
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        code = int(self._readline(60))
        text = out.read_text(errors="replace") if stdout is None else ""
        result = subprocess.CompletedProcess(
            ["actors", *args], code, text, err.read_text(errors="replace")
        )
        out.unlink(missing_ok=True)
        err.unlink()
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def assert_fault_line(
    verb: Sequence[str], proc: subprocess.CompletedProcess[str], fault: str
) -> None:
    """Exit 0, or exit 2 with one `actors: ...` line naming what ran out."""
    text = describe(verb, proc)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, text
    if (verb[0] == "recv" or verb[:2] == ["inbox", "wait"]) and proc.returncode == 75:
        return  # its --timeout (nothing came): not a fault
    assert proc.returncode in (0, 2), text
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("actors: "), text
        named = any(needle in lines[0] for needle in ONE_LINE_NEEDLES[fault])
        refusal = any(word in lines[0] for word in ("already finished", "no run ", "no session "))
        assert named or refusal, text


def walk_verbs(
    root: StateRoot,
    ids: dict[str, str],
    fault: str,
    forks: Forks,
    *,
    env: dict[str, str] | None = None,
    stdout: str | None = None,
    verbs: Sequence[tuple[str, ...]] = VERBS,
    left: int | None = None,
) -> dict[str, int]:
    """Every verb under the fault: its exit status by name; asserts the rules."""
    codes: dict[str, int] = {}
    for verb in verbs:
        argv = _argv(verb, ids)
        extra = {"ACTORS_SESSION": "s1", **(env or {})}
        if verb[0] in ("emit", "recv"):
            extra.update(_in_run(root, ids))
        before, folders = state_of(root.path), dirs_of(root.path)
        proc = forks.run(argv, env=extra, stdout=stdout, left=left)
        assert_fault_line(argv, proc, fault)
        if proc.returncode == 2 and _name(verb) not in SEVERAL_DELIVERIES:  # changed nothing
            assert state_of(root.path) == before, describe(argv, proc)
            assert dirs_of(root.path) == folders, describe(argv, proc)
        if fault in ("full", "read-only") and _name(verb) in MUST_WRITE:
            assert proc.returncode == 2, describe(argv, proc)
        codes[" ".join(verb)] = proc.returncode
    return codes


# -- every verb under every fault -------------------------------------------------------


def test_every_verb_on_a_full_disk(disk: StateRoot, tmp_path: Path) -> None:
    ids = world(disk, tmp_path)
    ids["token"] = run_token(disk.run(ids["run"]).dir)
    forks = Forks(tmp_path)
    try:
        fill(disk)
        codes = walk_verbs(disk, ids, "full", forks)
    finally:
        forks.close()
        filler(disk).unlink(missing_ok=True)
    refused = sorted(v for v, c in codes.items() if c == 2)
    assert cli("spawn", "-t", "true").returncode == 0  # space freed: it works again
    assert journals_parse(disk.path)
    record(
        SUITE,
        "every verb with the state root's disk full (a tmpfs, every free page taken)",
        len(codes),
        f"{len(refused)} refused with one line (No space left on device) changing nothing, "
        f"the rest answered; works again once space is freed",
    )


def test_every_verb_on_a_read_only_root(
    disk: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = world(disk, tmp_path)
    ids["token"] = run_token(disk.run(ids["run"]).dir)
    forks = Forks(tmp_path)
    try:
        with read_only(disk, tmp_path / "ro") as frozen:
            monkeypatch.setenv("ACTORS_HOME", str(frozen.path))
            codes = walk_verbs(frozen, ids, "read-only", forks)
    finally:
        forks.close()
    refused = sorted(v for v, c in codes.items() if c == 2)
    record(
        SUITE,
        "every verb with the state root mounted read-only",
        len(codes),
        f"{len(refused)} refused with one line (Read-only file system), the rest answered",
    )


@pytest.mark.parametrize("free", [0, 2])
def test_every_verb_out_of_descriptors(home: StateRoot, tmp_path: Path, free: int) -> None:
    ids = world(home, tmp_path)
    ids["token"] = run_token(home.run(ids["run"]).dir)
    forks = Forks(tmp_path, free=free)
    try:
        codes = walk_verbs(home, ids, "descriptors", forks)
    finally:
        forks.close()
    refused = sorted(v for v, c in codes.items() if c == 2)
    assert refused, "no verb ran out of descriptors: the fault was not made"
    record(
        SUITE,
        f"every verb with {free} descriptor(s) left below RLIMIT_NOFILE",
        len(codes),
        f"{len(refused)} refused with one line (Too many open files) changing nothing, "
        "the rest answered",
    )


def test_every_verb_out_of_memory(home: StateRoot, tmp_path: Path) -> None:
    """RLIMIT_AS at the child's size when the command starts: its first allocation
    beyond that (a list, a library to map) fails. One line, exit 2, nothing changed."""
    ids = world(home, tmp_path)
    ids["token"] = run_token(home.run(ids["run"]).dir)
    forks = Forks(tmp_path, memory=True)
    try:
        codes = walk_verbs(home, ids, "memory", forks)
    finally:
        forks.close()
    refused = sorted(v for v, c in codes.items() if c == 2)
    assert refused, "no verb ran out of memory: the fault was not made"
    record(
        SUITE,
        "every verb with no address space left (RLIMIT_AS at its size when it starts)",
        len(codes),
        f"{len(refused)} refused with one line (out of memory) changing nothing, the rest answered",
    )


def test_memory_running_out_at_every_step_of_a_call(home: StateRoot, tmp_path: Path) -> None:
    """The same calls with the child's heap filled and then more and more of it given back,
    so the first allocation that fails moves through the call: before the command's own handler stands (the
    configuration's import, stdout's wrapper), inside it, in its error path. Wherever it
    lands: one line, exit 2 (or the answer); never a traceback (CI saw one from the
    stdout wrapper, which ran before the handler)."""
    ids = world(home, tmp_path)
    forks = Forks(tmp_path, memory=True)
    verbs = [v for v in VERBS if v[0] in ("status", "ls", "inbox")]
    seen: set[int] = set()
    try:
        steps = [*range(0, 64 * 1024, 4096), *range(64 * 1024, 2 * 1024 * 1024, 96 * 1024)]
        steps += [2**k * 1024 * 1024 for k in range(1, 8)]  # until the calls are answered:
        for left in steps:  # the portable path (ACTORS_PORTABLE=1) needs more than 2 MiB
            if left > 2 * 1024 * 1024 and 0 in seen:
                break
            codes = walk_verbs(home, ids, "memory", forks, verbs=verbs, left=left)
            seen.update(codes.values())
            for hook in (["hook", "file-changed"], ["hook", "user-prompt-submit"]):
                proc = forks.run(hook, env={"ACTORS_SESSION": "s1"}, left=left)
                # a hook's 2 would wake a Claude Code model with the error as its prompt:
                # only FileChanged's own wake line (the unread follow-up) may do that
                woke = hook[1] == "file-changed" and proc.stderr.startswith("ACTORS: 1 unread")
                assert proc.returncode == (2 if woke else 0), (left, proc)
                assert "Traceback" not in proc.stderr, (left, proc)
    finally:
        forks.close()
    assert 2 in seen, f"no call ran out of memory: the fault was not made: {seen}"
    if not os.environ.get("ACTORS_PORTABLE"):  # there the calls' threads want fresh address
        # space the filled heap never gives back, so some runs never reach an answer
        assert 0 in seen, f"the sweep never crossed from refused to answered: {seen}"


def test_every_verb_writing_to_dev_full(home: StateRoot, tmp_path: Path) -> None:
    """stdout is /dev/full: what a command prints is lost, and it says so; `inbox read`
    leaves the follow-ups unread, since nobody could read them."""
    ids = world(home, tmp_path)
    ids["token"] = run_token(home.run(ids["run"]).dir)
    inbox = SessionInbox(session_paths(home, "s1"))
    forks = Forks(tmp_path)
    try:
        for args in (["inbox", "read"], ["inbox", "read", "--json"]):
            proc = forks.run(args, env={"ACTORS_SESSION": "s1"}, stdout="/dev/full")
            assert proc.returncode == 2, describe(args, proc)
            assert "cannot write the output (stdout): No space left on device" in proc.stderr
            assert len(inbox.unread()) == 1, "marked read though nothing was written out"
        readers = [v for v in VERBS if _name(v) in READERS]
        codes = walk_verbs(home, ids, "stdout", forks, stdout="/dev/full", verbs=readers)
        printing = sum(code == 2 for code in codes.values())
    finally:
        forks.close()
    proc = cli("inbox", "read", "--session", "s1")
    assert proc.returncode == 0 and "1 unread follow-up(s)" in proc.stdout, proc.stderr
    assert inbox.unread() == []
    record(
        SUITE,
        "every reading verb with stdout on /dev/full; `inbox read` (text and --json)",
        len(readers) + 2,
        f"{printing} said `cannot write the output (stdout)` in one line, exit 2; the "
        "follow-up stayed unread until a read that could be written",
    )


# -- a run's end survives a disk that is full for a while ------------------------------


@pytest.mark.parametrize("graph", ["leaf", "sequence"])
def test_a_run_ending_on_a_full_disk_waits_and_ends_done(
    disk: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graph: str
) -> None:
    """The command prints, the disk fills, the command prints again and exits: every
    write of the run's end (command.done, the output, progress, run.done, result.json,
    the follow-up) meets a full disk. The runner waits with its outcome in memory, the
    run stays `running` (never `exited`) meanwhile, and once space is freed (~3 s later)
    it ends `done` with all of its output and exactly one follow-up."""
    assert cli("session", "register", "--harness", "file", "--id", "s1").returncode == 0
    ready, go = make_fifo(tmp_path / "ready"), make_fifo(tmp_path / "go")
    command = (
        'sh -c \'echo $$ > "$1"; echo before-the-fill; read x < "$2"; '
        "echo after-the-fill; exit 0' g {r} {g}"
    )
    recipe = write_recipe(
        tmp_path, "ending", {"template": command if graph == "leaf" else ["true", command]}
    )
    spawned = actors.spawn(str(recipe), values={"r": str(ready), "g": str(go)}, session="s1")
    run, paths = str(spawned["run"]), disk.run(str(spawned["run"]))
    command_pid = int(read_fifo_line(ready))
    assert runner_mode(disk, run) == "poll"
    pad_to_page(paths.events)  # command.done itself needs a page that is not there
    fill(disk)
    with open(go, "w") as gate:  # the command goes on, prints, and exits
        gate.write("go\n")
    from runtime.core.process import wait_gone

    assert wait_gone([command_pid], timeout=30), "the command did not end"
    full_until = time.monotonic() + 3.0  # the fault: the disk stays full this long
    seen = 0
    while time.monotonic() < full_until:
        status = actors.status(run)
        assert status["status"] == "running", status  # alive and waiting: not `exited`
        assert not paths.result.exists()
        seen += 1
        time.sleep(0.5)  # the fault's duration is the point here, not a synchronisation
    filler(disk).unlink()
    summary = actors.wait(run, timeout=60)
    assert summary["status"] == "done", summary
    result = json.loads(paths.result.read_text())
    assert "before-the-fill" in result["output"] and "after-the-fill" in result["output"]
    assert "after-the-fill" in paths.stdout.read_text()
    from runtime.core.process import wait_gone as gone

    assert gone([int(spawned["pid"])], timeout=30), "the runner did not exit"
    follow_ups = SessionInbox(session_paths(disk, "s1")).entries()
    assert [e["envelope"]["type"] for e in follow_ups] == ["run.done"], follow_ups
    assert "of waiting" in paths.runner_log.read_text()  # what it waited for, once it could
    assert journals_parse(disk.path)
    record(
        SUITE,
        f"disk full for 3 s while a run ends (its graph: {graph})",
        1,
        f"`running` on {seen} looks meanwhile (never `exited`); then `done` with all its "
        "output, one run.done follow-up, runner.log says what it waited for",
    )


def _killed_at(
    point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **spawn: Any
) -> dict[str, Any]:
    """A run whose runner is SIGKILLed at a pause point of its end."""
    barrier = make_fifo(tmp_path / "barrier")
    monkeypatch.setenv("ACTORS_PAUSE_AT", point)
    monkeypatch.setenv("ACTORS_PAUSE_FIFO", str(barrier))
    try:
        spawned = actors.spawn(**spawn)
    finally:
        monkeypatch.delenv("ACTORS_PAUSE_AT")
        monkeypatch.delenv("ACTORS_PAUSE_FIFO")
    pid, reached = read_fifo_line(barrier, timeout=60).split()
    assert reached == point and int(pid) == spawned["pid"]
    os.kill(int(pid), signal.SIGKILL)
    from runtime.core.process import wait_gone

    assert wait_gone([int(pid)], timeout=30)
    return spawned


@pytest.mark.parametrize("point", ["runner.before_finish", "runner.before_result"])
@pytest.mark.parametrize(
    ("template", "status", "code"),
    [
        ("sh -c 'echo the-answer; exit 0'", "done", 0),
        ("sh -c 'echo half >&2; exit 3'", "failed", 3),
    ],
    ids=["exit-0", "exit-3"],
)
def test_a_runner_dead_after_its_command_ended_is_folded_from_events(
    home: StateRoot,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    template: str,
    status: str,
    code: int,
    point: str,
) -> None:
    """The runner dies after its command ended, before result.json: between
    `command.done` and the run's end (runner.before_finish), or after its own terminal
    event (runner.before_result). events.jsonl proves how it ended: the run is that, not
    "runner gone without a result", and gets exactly one follow-up saying so."""
    assert cli("session", "register", "--harness", "file", "--id", "s1").returncode == 0
    spawned = _killed_at(point, tmp_path, monkeypatch, template=template, session="s1")
    run, paths = str(spawned["run"]), home.run(str(spawned["run"]))
    seen = actors.status(run)
    assert (seen["status"], seen["code"]) == (status, code), seen
    assert "the runner died before result.json" in str(seen["reason"])
    for _ in range(2):
        assert cli("reconcile").returncode == 0
    result = json.loads(paths.result.read_text())
    assert (result["status"], result["code"], result["folded"]) == (status, code, "events.jsonl")
    if status == "done" and point == "runner.before_finish":
        assert result["output"] == "the-answer\n"  # the one command's output, as the runner had it
    follow_ups = SessionInbox(session_paths(home, "s1")).entries()
    assert [e["envelope"]["type"] for e in follow_ups] == [f"run.{status}"], follow_ups
    record(
        SUITE,
        f"runner SIGKILLed at {point}, its one command having exited {code}",
        1,
        f"status {status} (code {code}) from events.jsonl, never `exited`; reconcile "
        f"publishes it once; one run.{status} follow-up",
    )


def test_a_larger_graph_whose_runner_died_is_exited(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two steps: the last command.done does not decide the run (the graph's own rules
    do, in the dead runner): nothing is proven, and the run is `exited` as before."""
    recipe = write_recipe(tmp_path, "two", {"template": ["echo one", "echo two"]})
    spawned = _killed_at("runner.before_finish", tmp_path, monkeypatch, recipe=str(recipe))
    assert actors.status(str(spawned["run"]))["status"] == "exited"
    assert cli("reconcile").returncode == 0
    assert actors.result(str(spawned["run"]))["status"] == "exited"


# -- servers under the fault: every MCP request answered, the dashboard serving ----------


class McpClient:
    """`actors mcp` over its stdio, one request at a time (every answer awaited with a
    bound: a request left unanswered fails the test instead of hanging it)."""

    def __init__(self, session: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors", "mcp", "--session", session],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.next_id = 0
        info = {"name": "faults", "version": "1"}
        self.ask(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"{method} {params} unanswered after {timeout}s"
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert answer.get("id") == self.next_id, answer
        return answer

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(is an error, its text) of a tools/call, answered as a tool result."""
        answer = self.ask("tools/call", {"name": name, "arguments": arguments})
        assert "result" in answer, answer  # a tool error, never a bare JSON-RPC error
        result = answer["result"]
        return bool(result.get("isError")), result["content"][0]["text"]

    def close(self) -> str:
        """End of input: the server answers what is in flight and exits; its stderr."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stderr is not None
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()
        return err


TOOL_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("spawn", {"template": "echo via-mcp"}),
    ("message", {"to": "run:{run}", "type": "job.item", "body": "x"}),
    ("inspect", {"target": "run:{done}"}),
    ("inbox_read", {"peek": True}),
    ("inbox_read", {}),
    ("recipes", {}),
)


def _calls(ids: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, {k: v.format(**ids) if isinstance(v, str) else v for k, v in args.items()})
        for name, args in TOOL_CALLS
    ]


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@contextlib.contextmanager
def out_of_descriptors(pid: int) -> Iterator[None]:
    """Lower a live process's open-file limit to what it holds now (prlimit), then give
    its limit back."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (_fds(pid), hard))
    try:
        yield
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("fault", ["descriptors", "full"])
def test_every_mcp_tool_answers_under_the_fault(
    disk: StateRoot, tmp_path: Path, fault: str
) -> None:
    ids = world(disk, tmp_path)
    client = McpClient("s1")
    unread = SessionInbox(session_paths(disk, "s1")).unread
    answers: list[tuple[str, bool, str]] = []
    try:
        assert not client.tool("recipes", {})[0]  # up and serving before the fault
        fault_on = out_of_descriptors(client.proc.pid) if fault == "descriptors" else _full(disk)
        with fault_on:
            for name, arguments in _calls(ids):
                failed, text = client.tool(name, arguments)
                answers.append((name, failed, text))
                if failed:
                    assert "internal error" not in text and "\n" not in text, text
                    assert any(needle in text for needle in ONE_LINE_NEEDLES[fault]), text
        took = next(failed for name, failed, _ in answers[::-1] if name == "inbox_read")
        # read once its answer was written, unread when it was refused: never lost
        assert len(unread()) == (1 if took else 0), answers
        failed, text = client.tool("inbox_read", {})  # the fault is gone: it works
        assert not failed and text.startswith(f"{1 if took else 0} unread"), text
        assert unread() == []
    finally:
        err = client.close()
    assert client.proc.returncode == 0, err
    assert "Traceback" not in err, err
    refused = [name for name, failed, _ in answers if failed]
    assert "spawn" in refused  # a spawn needs files and descriptors: the fault was made
    record(
        SUITE,
        f"every MCP tool with the server {'out of descriptors' if fault == 'descriptors' else 'on a full disk'}",
        len(answers),
        f"every request answered; {len(refused)} as a tool error of one line naming the "
        "fault, the rest with their result; the server went on serving",
    )


@contextlib.contextmanager
def _full(root: StateRoot) -> Iterator[None]:
    fill(root)
    try:
        yield
    finally:
        filler(root).unlink(missing_ok=True)


def test_mcp_inbox_read_whose_answer_cannot_be_written_leaves_them_unread(
    home: StateRoot, tmp_path: Path
) -> None:
    """The client stops reading (its end of the pipe closed) before the answer comes: the
    server cannot write it, so the follow-ups it took go back, unread."""
    ids = world(home, tmp_path)
    del ids
    client = McpClient("s1")
    assert client.proc.stdout is not None
    client.proc.stdout.close()  # nobody reads the answers any more
    client.send(
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "tools/call",
            "params": {"name": "inbox_read", "arguments": {}},
        }
    )
    assert client.proc.stdin is not None
    client.close()
    unread = SessionInbox(session_paths(home, "s1")).unread()
    assert len(unread) == 1, "marked read though its answer never reached the client"
    record(
        SUITE,
        "MCP inbox_read whose answer cannot be written (the client closed its end)",
        1,
        "the follow-up taken for it went back: still unread",
    )


class Dashboard:
    """`actors dashboard --port 0` as a user starts it, with its URL and token."""

    def __init__(self, nofile: int | None = None) -> None:
        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "actors", "dashboard", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit,
        )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        url = self.proc.stdout.readline().strip() if ready else ""
        assert url.startswith("http://"), f"dashboard did not start: {url!r}"
        self.base, self.token = url.split("/?token=")
        import httpx

        self.http = httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def get(self, path: str) -> Any:
        return self.http.get(path)

    def stop(self) -> str:
        self.http.close()
        self.proc.send_signal(signal.SIGINT)
        _out, err = self.proc.communicate(timeout=30)
        return err


def test_dashboard_out_of_descriptors_answers_503_and_keeps_serving(
    home: StateRoot, tmp_path: Path
) -> None:
    ids = world(home, tmp_path)
    board = Dashboard()
    try:
        assert board.get(f"/api/runs/{ids['done']}").status_code == 200
        pid = board.proc.pid
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (_fds(pid) + 1, hard))  # one: the socket
        try:
            answer = board.get(f"/api/runs/{ids['done']}")
            during = actors.spawn(template="echo during-the-fault")  # its events: not readable
            assert finished(during)["status"] == "done"
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        assert answer.status_code == 503, answer.text
        assert "Too many open files" in answer.json()["error"], answer.text
        assert board.proc.poll() is None, "the dashboard exited"
        assert board.get(f"/api/runs/{ids['done']}").status_code == 200  # serving again
        # the run it could not read then is read with the next event (no timer)
        after = actors.spawn(template="echo after-the-fault")
        assert finished(after)["status"] == "done"
        deadline = time.monotonic() + 30
        while True:  # bounded: the board catches up on the next file event
            listed = {
                r["run"]: r["status"]
                for g in board.get("/api/runs").json()["groups"]
                for r in g["runs"]
            }
            if listed.get(str(during["run"])) == "done":
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.1)
    finally:
        err = board.stop()
    assert board.proc.returncode == 0, err
    assert "Traceback" not in err, err
    record(
        SUITE,
        "dashboard with its descriptors used up (prlimit), then given back",
        1,
        "503 with `Too many open files`; it kept serving, and the run it could not read "
        "meanwhile showed up with the next file event",
    )


UNSHARE = shutil.which("unshare")


def _without_inotify(*args: str) -> subprocess.CompletedProcess[str]:
    """`actors ARGS` in a user namespace allowed no inotify instance (its own limit:
    nothing else on the machine is touched)."""
    script = 'echo 0 > /proc/sys/user/max_inotify_instances && exec "$@"'
    return subprocess.run(
        [
            UNSHARE or "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            script,
            "sh",
            sys.executable,
            "-m",
            "actors",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(UNSHARE is None, reason="needs unshare(1) for a user namespace")
def test_watch_needs_no_inotify(home: StateRoot) -> None:
    """`actors watch` sleeps on doorbells and exit watches, not on inotify: with no
    inotify instance left it works as ever (and ends at its timeout, exit 0)."""
    probe = _without_inotify("--version")
    if probe.returncode != 0:
        pytest.skip(f"no user namespace with its own inotify limit here: {probe.stderr}")
    proc = _without_inotify("watch", "--timeout", "2")
    assert proc.returncode == 0, describe(("watch",), proc)
    assert proc.stderr == "", describe(("watch",), proc)


@pytest.mark.skipif(UNSHARE is None, reason="needs unshare(1) for a user namespace")
@pytest.mark.parametrize("verb", [("dashboard", "--port", "0")])
def test_no_inotify_instance_left_is_one_line(home: StateRoot, verb: tuple[str, ...]) -> None:
    probe = _without_inotify("--version")
    if probe.returncode != 0:
        pytest.skip(f"no user namespace with its own inotify limit here: {probe.stderr}")
    proc = _without_inotify(*verb)
    assert proc.returncode == 2, describe(verb, proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "max_user_instances" in lines[0], describe(verb, proc)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    record(
        SUITE,
        f"`actors {verb[0]}` with no inotify instance left (a user namespace limited to 0)",
        1,
        "exit 2, one line naming fs.inotify.max_user_instances",
    )


def test_dashboard_past_its_pidfd_budget_does_not_poll(home: StateRoot, tmp_path: Path) -> None:
    """RLIMIT_NOFILE 64: the dashboard follows 16 runners on pidfds; 20 runs are live.
    The other 4 wait asleep for a slot: no wake-up while nothing happens. When every
    runner is killed outright, every run is still seen to end."""
    ready = make_fifo(tmp_path / "ready")
    recipe = write_recipe(
        tmp_path, "idle", {"template": "sh -c 'echo up > \"$1\"; exec sleep 300' x {f}"}
    )
    spawned = []
    for _ in range(20):
        spawned.append(actors.spawn(str(recipe), values={"f": str(ready)}))
        assert read_fifo_line(ready) == "up"
    board = Dashboard(nofile=64)
    try:
        woken = wake_ups([board.proc.pid], 3.0)[board.proc.pid]
        assert woken == 0, f"the dashboard woke {woken} times while nothing happened"
        for run in spawned:
            os.kill(int(run["pid"]), signal.SIGKILL)  # no file written: only pidfds tell
        names = {str(r["run"]) for r in spawned}
        deadline = time.monotonic() + 60
        while True:  # bounded: each end reaches the board through a pidfd, or a freed slot
            listed = {
                r["run"]: r["status"]
                for g in board.get("/api/runs").json()["groups"]
                for r in g["runs"]
            }
            if all(listed.get(n) == "exited" for n in names):
                break
            assert time.monotonic() < deadline, {n: listed.get(n) for n in names}
            time.sleep(0.2)
    finally:
        err = board.stop()
    assert board.proc.returncode == 0, err
    record(
        SUITE,
        "dashboard with 20 live runs and room for 16 pidfds (RLIMIT_NOFILE 64)",
        1,
        "no wake-up in 3 s of quiet; every runner SIGKILLed was seen to end",
    )

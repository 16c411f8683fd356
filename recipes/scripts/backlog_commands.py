"""What a backlog worker runs: the `actors` CLI (its room and inbox) and the agent and
validation commands, each in a process group of its own.

A sibling module of backlog_worker.py (imported from the script's own directory).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECV_TIMEOUT_EXIT = 75
"""`actors recv --timeout` exits with this when nothing arrived."""
TAIL_CHARS = 400
TERM_GRACE_S = 5.0
TELL_AT_ONCE = 8
"""`actors message` processes a worker runs at once to tell the others."""


class WorkerError(Exception):
    """A setup or runtime problem that stops this worker (exit 2)."""


# -- the actors runtime, through its CLI ------------------------------------------------


def post(kind: str, body: dict[str, Any], summary: str, level: str = "info") -> None:
    """Post one message to this run's room as branch:<run>/<worker>."""
    argv = ["actors", "emit", "--to", "room", kind, json.dumps(body), "--body-json"]
    argv += ["--summary", summary[:500], "--level", level]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise WorkerError(f"actors emit {kind} failed ({proc.returncode}): {proc.stderr.strip()}")


def follow_up(kind: str, body: dict[str, Any], summary: str, level: str = "warning") -> None:
    """Tell the coordinator session now (`--deliver followup`): for what it must decide
    about, such as a failed task (retry, reassign or drop it) or a drained swarm (merge
    its branches). The room only records."""
    argv = ["actors", "emit", kind, json.dumps(body), "--deliver", "followup", "--body-json"]
    argv += ["--summary", summary[:500], "--level", level]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise WorkerError(f"actors emit {kind} failed ({proc.returncode}): {proc.stderr.strip()}")


def tell_workers(run_id: str, workers: list[str], kind: str) -> list[str]:
    """One `kind` message to each worker's branch inbox, TELL_AT_ONCE sent side by side
    (a swarm may have 64 workers); the workers that could not be told, with why."""
    failed = []
    for start in range(0, len(workers), TELL_AT_ONCE):
        batch = [
            (
                worker,
                subprocess.Popen(
                    ["actors", "message", f"branch:{run_id}/{worker}", kind],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for worker in workers[start : start + TELL_AT_ONCE]
        ]
        for worker, proc in batch:
            _, err = proc.communicate()
            if proc.returncode != 0:
                failed.append(f"{worker}: {err.strip()}")
    return failed


def receive(block: bool) -> dict[str, Any] | None:
    """The next message of this worker's branch inbox (marked handled), or None."""
    argv = ["actors", "recv", "--json"] + ([] if block else ["--timeout", "0"])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode == RECV_TIMEOUT_EXIT and not block:
        return None
    if proc.returncode != 0:
        raise WorkerError(f"actors recv failed ({proc.returncode}): {proc.stderr.strip()}")
    envelope: dict[str, Any] = json.loads(proc.stdout)
    return envelope


def start_ticks(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22):
    with the pid, it names one process for good. None when there is no such process
    (or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


CANNOT_WATCH = -1


def watch_process(pid: int, ticks: int) -> int | None:
    """A pidfd on the process `pid` started at `ticks`, readable once it ends; None when
    it has ended already (or its pid is another process's now); CANNOT_WATCH where
    there are no pidfds or no /proc to tell one process from another."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or start_ticks(os.getpid()) is None:
        return CANNOT_WATCH
    try:
        fd: int = opener(pid)
    except ProcessLookupError:
        return None
    if start_ticks(pid) != ticks:  # checked after the pidfd: it cannot change under it
        os.close(fd)
        return None
    return fd


def receive_watching(
    peers: dict[str, tuple[int, int]], on_end: Callable[[str], None]
) -> dict[str, Any]:
    """Block on `actors recv` for the next message of this worker's branch inbox (no
    polling) and meanwhile watch each peer's process (`name -> (pid, start ticks)`): a
    peer whose process ends is handed to `on_end`, once, while the wait goes on."""
    watched: dict[int, str] = {}
    for name, (pid, ticks) in peers.items():
        fd = watch_process(pid, ticks)
        if fd is None:
            on_end(name)
        elif fd != CANNOT_WATCH:
            watched[fd] = name
    proc = subprocess.Popen(
        ["actors", "recv", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        poller = select.poll()
        poller.register(proc.stdout, select.POLLIN)
        for fd in watched:
            poller.register(fd, select.POLLIN)
        while True:
            events = [fd for fd, _ in poller.poll()]
            if proc.stdout.fileno() in events:
                break
            for fd in events:
                poller.unregister(fd)
                os.close(fd)
                on_end(watched.pop(fd))
        out, err = proc.communicate()
    finally:
        for fd in watched:
            os.close(fd)
        if proc.poll() is None:  # only on an exception (a stop): recv goes with us
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip()
        raise WorkerError(f"actors recv failed ({proc.returncode}): {why}")
    envelope: dict[str, Any] = json.loads(out)
    return envelope


# -- commands ---------------------------------------------------------------------------


def unfound(program: str, cwd: Path, env: dict[str, str]) -> str | None:
    """Why `program` cannot start in `cwd` (not on PATH, not an executable file), or
    None: asked before it is handed to `actors group run`, so a missing agent is said
    the same way, once, with a group or without."""
    if "/" in program:
        path = cwd / Path(program).expanduser()
        return None if path.is_file() and os.access(path, os.X_OK) else "not an executable file"
    return None if shutil.which(program, path=env.get("PATH")) else "not found on PATH"


def run_command(
    argv: list[str], cwd: Path, log: Path, env: dict[str, str], timeout: float | None
) -> tuple[int, str | None]:
    """Run argv in a process group of its own, output to `log`; (code, problem or None).

    The group is killed when the command ends (leftovers), times out, or this worker is
    stopped; the group stays in the run's session, so the runner's final sweep covers it.
    """
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        except OSError as exc:  # said once: in the log, and as the problem (no tail)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            out.write(f"cannot start {argv[0]!r}: {exc.strerror}\n".encode())
            return code, f"cannot start {argv[0]!r}: {exc.strerror}"
    problem = None
    try:
        if not _wait_unreaped(proc, timeout):
            problem = f"timed out after {timeout:g}s"
            _killpg(proc.pid, signal.SIGTERM)
            if not _wait_unreaped(proc, TERM_GRACE_S):
                _killpg(proc.pid, signal.SIGKILL)
    finally:
        # Exited but not yet reaped: the group id cannot have been reused, so this hits
        # only what the command left behind (or, on an exception, the command itself).
        _killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    return code, problem


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for the process to exit without reaping it; False on timeout."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        fd = opener(proc.pid)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(None if timeout is None else timeout * 1000))
        finally:
            os.close(fd)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:  # no pidfd: waitid(WNOWAIT) leaves the zombie in place
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if info is not None:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def tail(path: Path) -> str:
    try:
        text = path.read_bytes()[-TAIL_CHARS * 4 :].decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if not line.startswith("$ ")]
    return " | ".join(lines)[-TAIL_CHARS:]

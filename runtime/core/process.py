"""Process identity and signalling that never hits a stranger.

A run's runner is recorded as (pid, start ticks, boot id, argv, cwd). Before any signal
we open a pidfd for the pid and re-read its identity: only when every recorded field
still matches is the signal sent, through the pidfd, so a pid recycled in between can
never receive it. Anything we cannot verify (another user's process, a platform without
/proc) fails closed: it is reported, not signalled, and never counted as running.

Linux reads /proc directly (a few small reads, no psutil import on the CLI's hot path);
other platforms fall back to psutil.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple, TypeGuard

_PROC = Path("/proc")
HAVE_PROC = _PROC.joinpath("self", "stat").exists()

Verdict = Literal["valid", "dead", "mismatch", "unverifiable"]


class ProcStat(NamedTuple):
    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start_ticks: int


def read_stat(pid: int) -> ProcStat | None:
    """Fields of /proc/<pid>/stat, or None when the process is gone."""
    # os.open on a str path, not pathlib: a session scan reads every process's stat, and
    # pathlib's joins and file object cost three quarters of each read.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    try:
        data = os.read(fd, 4096)
    except ProcessLookupError:
        return None
    finally:
        os.close(fd)
    if not data:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    rest = data[data.rindex(b")") + 2 :].split()
    return ProcStat(pid, rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))


def has_exited(stat: ProcStat) -> bool:
    """Whether the process as a whole is gone, with only its zombie entry left.

    A zombie leader is not enough: when the main thread of a threaded process ends first,
    /proc shows its stat as `Z` while the other threads still run (or are still closing
    their files on the way out of a SIGKILL). The whole group is gone only once its task
    list holds the leader alone.
    """
    if stat.state not in ("Z", "X"):
        return False
    try:
        return len(os.listdir(f"/proc/{stat.pid}/task")) <= 1
    except OSError:
        return True


_boot_id: str | None = None


def boot_id() -> str | None:
    global _boot_id
    if _boot_id is None and HAVE_PROC:
        with contextlib.suppress(OSError):
            _boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return _boot_id


def read_proc(pid: int, name: str) -> bytes | None:
    """The whole of `/proc/<pid>/<name>` (cmdline, environ), or None when the process is
    gone or not ours to read. str paths, as in read_stat: every status check of a live
    run reads these."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _cmdline(pid: int) -> list[str] | None:
    data = read_proc(pid, "cmdline")
    if data is None:
        return None
    return [p.decode(errors="replace") for p in data.split(b"\0")[:-1]]


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def capture(
    pid: int, *, argv: list[str] | None = None, cwd: str | None = None
) -> dict[str, Any] | None:
    """The identity of a live process, as stored in run.json (`process_identity`).

    A parent that just started the process passes the argv and cwd it exec'd: right
    after posix_spawn returns, the child's /proc cmdline can still be empty (the kernel
    fills it in after releasing the parent), while its start ticks are already final.
    """
    if HAVE_PROC:
        stat = read_stat(pid)
        if stat is None or stat.state in ("Z", "X"):
            return None
        return {
            "pid": pid,
            "pgid": stat.pgid,
            "sid": stat.sid,
            "start_ticks": stat.start_ticks,
            "boot_id": boot_id(),
            "argv": argv if argv is not None else _cmdline(pid),
            "cwd": cwd if cwd is not None else _cwd(pid),
            "platform": sys.platform,
        }
    import psutil

    try:
        proc = psutil.Process(pid)
        return {
            "pid": pid,
            "pgid": os.getpgid(pid),
            "sid": os.getsid(pid),
            "start_ticks": None,
            "create_time": proc.create_time(),
            "boot_id": None,
            "argv": proc.cmdline(),
            "cwd": proc.cwd(),
            "platform": sys.platform,
        }
    except (psutil.Error, OSError):
        return None


def plausible_pid(value: Any) -> TypeGuard[int]:
    """Whether a recorded value can be a process id at all: an int (not a bool) in the
    range of pid_t above 0. A state file is data a run could have written: a pid of 0,
    -1 or 10**4000 must never reach kill(2) or pidfd_open(2)."""
    return type(value) is int and 0 < value < 1 << 31


def verify(identity: dict[str, Any] | None) -> tuple[Verdict, str]:
    """Does the recorded process still exist and is it still the same process?"""
    if not identity or not plausible_pid(identity.get("pid")):
        return "unverifiable", "no process identity recorded"
    pid = identity["pid"]
    current = capture(pid)
    if current is None:
        return "dead", f"pid {pid} is gone"
    for key in ("boot_id", "start_ticks", "create_time", "argv"):
        want = identity.get(key)
        if key == "argv" and current.get(key) == []:
            continue  # exec in progress: the start ticks above already pin the process
        if want is not None and current.get(key) != want:
            if current.get(key) is None:
                return "unverifiable", f"cannot read {key} of pid {pid}"
            return "mismatch", f"pid {pid} now belongs to another process ({key} differs)"
    want_cwd = identity.get("cwd")
    if want_cwd is not None and current.get("cwd") not in (want_cwd, None):
        return "mismatch", f"pid {pid} now belongs to another process (cwd differs)"
    if identity.get("start_ticks") is None and identity.get("create_time") is None:
        return "unverifiable", f"no start time recorded for pid {pid}"
    return "valid", "process matches its recorded identity"


def pidfd_open(pid: int) -> int | None:
    """A pidfd pinning this exact process, or None where unsupported or gone."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or not plausible_pid(pid):
        return None
    try:
        fd: int = opener(pid)
        return fd
    except OSError:
        return None


def send_verified(identity: dict[str, Any], sig: int) -> tuple[Verdict, str]:
    """Signal the recorded process only if it is still that process."""
    pid = identity.get("pid")
    if not plausible_pid(pid):
        return "unverifiable", "no pid recorded"
    fd = pidfd_open(pid)
    try:
        verdict, reason = verify(identity)
        if verdict != "valid":
            return verdict, reason
        try:
            if fd is not None:
                signals().pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return "dead", f"pid {pid} exited before the signal"
        return "valid", reason
    finally:
        if fd is not None:
            os.close(fd)


def list_pids() -> list[int]:
    if HAVE_PROC:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    import psutil

    return list(psutil.pids())


def session_members(sid: int, *, also_descendants_of: int | None = None) -> dict[int, int]:
    """Live processes of session `sid` (plus descendants of a pid), as pid -> start ticks.

    Orphaned grandchildren keep their session id after reparenting, so the session is how
    every process a run started is found, even after the runner itself is gone.
    """
    stats = {}
    for pid in list_pids():
        stat = read_stat(pid) if HAVE_PROC else None
        if stat is not None and not has_exited(stat):
            stats[pid] = stat
    members = {pid: st.start_ticks for pid, st in stats.items() if st.sid == sid}
    if also_descendants_of is not None:
        children: dict[int, list[int]] = {}
        for st in stats.values():
            children.setdefault(st.ppid, []).append(st.pid)
        stack, seen = [also_descendants_of], {also_descendants_of}
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in seen:
                    seen.add(child)
                    members[child] = stats[child].start_ticks
                    stack.append(child)
    members.pop(os.getpid(), None)
    return members


def signals() -> ModuleType:
    """The signal module, imported on first use: it costs ~0.8 ms (it builds its enums)
    and most callers of this module (every `actors message`) only read identities."""
    import signal

    return signal


def signal_exact(pid: int, start_ticks: int, sig: int) -> bool:
    """Signal pid only while it is still the process first seen with these ticks."""
    fd = pidfd_open(pid)
    try:
        stat = read_stat(pid)
        if stat is None or stat.start_ticks != start_ticks:
            return False
        if fd is not None:
            signals().pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def kill_session(sid: int, *, root_pid: int | None = None, rounds: int = 20) -> int:
    """SIGKILL every process of a run's session (and the root's descendants).

    Members are frozen with SIGSTOP first so none can fork a replacement while we walk
    the list, then killed; the scan repeats until nothing is left. Returns how many
    processes were signalled.
    """
    return freeze_and_kill(lambda: session_members(sid, also_descendants_of=root_pid), rounds)


def freeze_and_kill(scan: Callable[[], dict[int, int]], rounds: int = 20) -> int:
    """SIGSTOP every process `scan` proves ({pid: start ticks}), then SIGKILL each still
    that process, then scan again, until nothing is left: a frozen member cannot fork a
    replacement while the list is walked. Returns how many were killed."""
    killed = 0
    for _ in range(rounds):
        members = scan()
        if not members:
            break
        for pid, ticks in members.items():
            signal_exact(pid, ticks, signals().SIGSTOP)
        for pid, ticks in members.items():
            if signal_exact(pid, ticks, signals().SIGKILL):
                killed += 1
        wait_gone(list(members), timeout=1.0)
    return killed


def is_gone(pid: int) -> bool:
    stat = read_stat(pid) if HAVE_PROC else None
    if HAVE_PROC:
        return stat is None or has_exited(stat)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def wait_gone(pids: list[int], timeout: float) -> bool:
    """Block until every pid has exited (zombies count as exited), or the timeout."""
    deadline = time.monotonic() + timeout
    fds = {pid: pidfd_open(pid) for pid in pids}
    try:
        while True:
            alive = [pid for pid in pids if not is_gone(pid)]
            if not alive:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            fd = fds.get(alive[0])
            if fd is not None:
                import select  # only waiting for an exit polls

                poller = select.poll()
                poller.register(fd, select.POLLIN)
                poller.poll(min(remaining, 0.25) * 1000)
            else:
                time.sleep(min(remaining, 0.01))
    finally:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""A runner's graceful stops; spawn starts a runner with them blocked."""
_early_stops: list[int] = []


def early_stop(signum: int, _frame: object) -> None:
    _early_stops.append(signum)


def replay_early_stops() -> None:
    """A stop signal sent before a runner's handler was installed (right after spawn
    returned the pid) is sent again, now to that handler: it cancels the run as a later
    one does, instead of killing the runner (an `exited` run and no follow-up)."""
    while _early_stops:
        os.kill(os.getpid(), _early_stops.pop(0))

"""Claiming a run's state directory and starting its runner: the part of spawn that
writes, and takes everything back when the runner cannot start.

The state directory is assembled in `<root>/tmp/` and renamed into `runs/<id>` in one
step, which fails if the id is taken, so two spawns can never share or wipe a
directory. The runner is started with posix_spawn in a new session (it leads its own
process group) and is never waited on by the caller; a runner that cannot start leaves
nothing behind (no run, no follow-up owed).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core import config
from runtime.core.errors import ActorsError, Conflict, Refused
from runtime.core.ids import new_id, new_token, now_iso, token_verifier
from runtime.core.platform import LIVENESS_FD
from runtime.runner import ENTRY
from runtime.store import safe
from runtime.store.events import record_event, write_progress
from runtime.store.layout import MAIN_ROOM, RunPaths, StateRoot
from runtime.store.writes import disk_error, ensure_dir, write_bytes_atomic, write_json_atomic

if TYPE_CHECKING:
    from runtime.store.records import RunRecord



def claim(root: StateRoot, paths: RunPaths, record: RunRecord) -> str:
    """Write the state dir under tmp/, then rename it into runs/ (fails if taken).
    Returns the run's token (the directory holds only its verifier)."""
    ensure_dir(root.path)
    ensure_dir(root.runs)
    ensure_dir(root.tmp)
    from runtime.runs.retention import cleanup_tmp

    cleanup_tmp(root)
    stage = RunPaths(root.spawn_stage(new_id()))
    ensure_dir(stage.dir)
    try:
        instance = record["run_instance_id"]
        write_json_atomic(stage.run_json, record)
        token = new_token()
        write_bytes_atomic(stage.token, (token_verifier(token) + "\n").encode())
        write_json_atomic(stage.communication, communication(record["run"], record["owner_id"]))
        write_progress(stage.progress, instance, phase="starting", active=0, completed=0, failed=0)
        record_event(stage.events, instance, "run.start", run=paths.run_id)
        for log in (stage.stdout, stage.stderr, stage.runner_log):
            write_bytes_atomic(log, b"", fsync=False)
        if record["mailbox"].get("endpoint") == "fifo":
            _make_fifo(stage.control_fifo)
        try:
            safe.rename(stage.dir, paths.dir)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):  # a full or read-only disk
                raise disk_error("move the new run into", paths.dir, exc) from exc
            raise Conflict(
                f"run id {paths.run_id} is already in use",
                hint="choose another --as, or archive/prune the old run first",
            ) from exc
        return token
    except BaseException:
        with contextlib.suppress(OSError, ActorsError):
            safe.rmtree(stage.dir)
        raise


def _make_fifo(path: Path) -> None:
    parent, name = safe.open_parent(path)
    try:
        os.mkfifo(name, 0o600, dir_fd=parent)
    finally:
        os.close(parent)


def communication(run_id: str, owner: str) -> dict[str, Any]:
    address = f"run:{run_id}"
    return {
        "self": address,
        "root": address,
        "parent": owner if owner.startswith("run:") else None,
        "rooms": [{"address": f"room:{run_id}", "name": MAIN_ROOM, "members": [address]}],
        "contacts": [{"address": "coordinator", "role": "coordinator", "session": owner}],
        "updated_at": now_iso(),
    }


def runner_argv(paths: RunPaths) -> list[str]:
    return [sys.executable, "-P", ENTRY, str(paths.dir)]


def start_runner(paths: RunPaths, root: StateRoot, token: str) -> int:
    argv = runner_argv(paths)
    env = dict(os.environ)
    env[config.HOME.name] = str(root.path)
    # A run started from inside another must not carry that run's marks: they prove
    # membership of the parent run when its orphans are stopped (runtime.core.members).
    for setting in (
        config.RUN_ID,
        config.RUN_TOKEN,
        config.BRANCH,
        config.RUN_INSTANCE,
        config.STATE_DIR,
        config.ADDRESS,
        config.RUNNER_STATE,  # a parked runner's own: from the caller it would misdirect
    ):
        env.pop(setting.name, None)
    for name in config.HARNESS_CAPABILITIES:  # the spawner's session's, never the run's
        env.pop(name, None)
    # The token reaches the run only through its processes' environment: the state
    # directory keeps its verifier (runtime.core.ids.token_verifier).
    env[config.RUN_TOKEN.name] = token
    # POSIX_SPAWN_OPEN would follow a link planted at runner.log: open it ourselves
    log_fd = safe.open_regular(paths.runner_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, log_fd, 1),
        (os.POSIX_SPAWN_DUP2, log_fd, 2),
    ]
    lock_fd = _liveness_lock(paths)
    if lock_fd >= 0:
        actions.append((os.POSIX_SPAWN_DUP2, lock_fd, LIVENESS_FD))
    try:
        pid = _spawn_detached(argv, env, actions)
    except OSError as exc:  # EAGAIN (a process limit), ENOMEM, EPERM, a missing interpreter
        _unclaim(root, paths)
        why = f"{errno.errorcode.get(exc.errno or 0, 'OSError')}: {exc.strerror or exc}"
        raise Refused(
            f"could not start the runner of run {paths.run_id} ({why}); nothing was kept",
            hint="free processes or memory (ulimit -u, a pids cgroup) and spawn again",
        ) from None
    finally:
        os.close(log_fd)
        if lock_fd >= 0:
            os.close(lock_fd)  # the runner's copy holds the lock from here on
    return pid


STARTER_TIMEOUT_S = 30.0
"""How long spawn waits for its short-lived starter to name the runner's pid (it only
calls posix_spawn and exits: milliseconds, seconds on a machine out of memory)."""


def _spawn_detached(argv: list[str], env: dict[str, str], actions: list[Any]) -> int:
    """posix_spawn the runner (a new session, the stop signals blocked until the runner
    can take them, runner.begin) from a child of ours that exits at once, and return the
    runner's pid: the runner is never a descendant of the process that spawned it. A
    harness that ends the tool it started by killing that tool's process tree (Copilot
    CLI ends its MCP servers with `pgrep -P` and `kill` of every descendant, whatever
    their session) so leaves the runs it spawned alone, as it does for a `spawn --wait`
    or a Python caller it kills. Errors of posix_spawn reach the caller as OSError."""
    import select
    import warnings

    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
    read_end, write_end = os.pipe()  # close-on-exec: the runner never holds either end
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns on fork with threads: the
            warnings.simplefilter("ignore", DeprecationWarning)  # child only spawns, exits
            starter = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        raise
    if starter == 0:  # the starter: nothing but posix_spawn, one write and _exit
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # a Ctrl-C waits for _exit
            pid = os.posix_spawn(
                argv[0], argv, env, file_actions=actions, setsid=True, setsigmask=stops
            )
            os.write(write_end, str(pid).encode())
        except OSError as exc:
            os.write(write_end, f"E{exc.errno or errno.EIO}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    answer = b""
    try:
        ready, _, _ = select.select([read_end], [], [], STARTER_TIMEOUT_S)
        answer = os.read(read_end, 64) if ready else b""
    finally:
        os.close(read_end)
        if not answer:  # hung or gone: it is not waited for longer than the bound
            with contextlib.suppress(OSError):
                os.kill(starter, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # SIGCHLD ignored: already reaped
            os.waitpid(starter, 0)  # it has exited (or been killed) by now: no zombie
    if answer.startswith(b"E") and answer[1:].isdigit():
        code = int(answer[1:])
        raise OSError(code, os.strerror(code))
    if not answer.isdigit():
        raise OSError(errno.ECHILD, "the runner's starter ended without starting it")
    return int(answer)


def _liveness_lock(paths: RunPaths) -> int:
    """The runner's liveness lock (runtime.core.platform.ExitWatch), taken here before
    the runner exists and handed to it: a watcher that opens its exit watch on the
    identity recorded below is never granted the lock while the runner lives. Never
    at LIVENESS_FD itself (a dup2 onto itself would keep it close-on-exec); -1 where it
    cannot be taken (the runner then takes it as it starts)."""
    import fcntl

    try:
        fd = safe.open_regular(paths.liveness, os.O_RDWR | os.O_CREAT)
    except (OSError, ActorsError):
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if fd == LIVENESS_FD:
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, LIVENESS_FD + 1)
            os.close(fd)
            fd = moved
    except OSError:
        os.close(fd)
        return -1
    return fd


def _unclaim(root: StateRoot, paths: RunPaths) -> None:
    """Take back a run whose runner never started (`starting`, owed nothing): out of
    `runs/` in one rename, then deleted, link-safely."""
    gone = root.spawn_stage(new_id())
    with contextlib.suppress(OSError, ActorsError):
        safe.rename(paths.dir, gone)
    with contextlib.suppress(OSError, ActorsError):
        safe.rmtree(gone if safe_exists(gone) else paths.dir)


def safe_exists(path: Path) -> bool:
    try:
        safe.lstat(path)
    except (OSError, ActorsError):
        return False
    return True

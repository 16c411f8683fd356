"""The few OS primitives that differ between platforms, each with its portable path.

Linux gives a process-exit descriptor (pidfd), an anonymous memory file (memfd) and
cgroups; macOS and the other POSIX systems do not. Every caller asks here, and gets the
Linux primitive where it exists or the portable POSIX path where it does not:

- a child's exit: its pidfd, else SIGCHLD on the caller's signal wakeup descriptor and a
  `waitid(WNOWAIT)` look that leaves the child unreaped (so its process group id stays
  its own until its leftovers are stopped);
- state that must cross an exec(): a memfd, else a 0600 file in the run's directory.

`ACTORS_PORTABLE` (runtime.core.config) forces every portable path on Linux, so the path
a macOS user takes runs in CI too (docs/performance.md names what ran where).
"""

from __future__ import annotations

import os

from runtime.core import config


def portable() -> bool:
    """Whether the Linux-only primitives are switched off (ACTORS_PORTABLE)."""
    return config.flag(config.PORTABLE)


def paths_taken() -> dict[str, str]:
    """Which path each primitive takes here (recorded in `run.runner.start`)."""
    linux = not portable()
    return {
        "exit_watch": "pidfd" if linux and hasattr(os, "pidfd_open") else "sigchld",
        "park_state": "memfd" if linux and hasattr(os, "memfd_create") else "file",
    }


def exit_fd(pid: int) -> int:
    """A descriptor readable once `pid` (our child) has exited, or -1: then the caller
    learns of its end by SIGCHLD and `has_exited`."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None or portable():
        return -1
    try:
        fd: int = opener(pid)
    except OSError:
        return -1
    return fd


def watches_children_by_signal() -> bool:
    """Whether a child's end is learned from SIGCHLD (no pidfd here)."""
    return getattr(os, "pidfd_open", None) is None or portable()


def has_exited(pid: int) -> bool:
    """Whether our child `pid` has exited, without reaping it (waitid WNOWAIT); where
    waitid is missing, a non-blocking waitpid answers and the exit status is kept for
    the caller's own `waitpid`, which then finds it in `_reaped`."""
    waitid = getattr(os, "waitid", None)
    if waitid is not None:
        try:
            return waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    if done:
        _reaped[pid] = status
    return bool(done)


_reaped: dict[int, int] = {}


def reap(pid: int) -> int:
    """Wait for our exited child and return its exit code (a signal's is negative)."""
    status = _reaped.pop(pid, None)
    if status is None:
        status = os.waitpid(pid, 0)[1]
    return os.waitstatus_to_exitcode(status)


def state_fd(directory: str) -> int:
    """A private, anonymous place for a process's state across its own exec(): a memfd,
    else a 0600 file in `directory`, unlinked at once (its descriptor survives exec)."""
    maker = getattr(os, "memfd_create", None)
    if maker is not None and not portable():
        fd: int = maker("actors-runner-state", 0)
        return fd
    import tempfile

    fd, path = tempfile.mkstemp(prefix=".runner-state-", dir=directory)
    os.unlink(path)
    return fd


class ExitWatch:
    """A descriptor that becomes readable once a process has exited: for any process,
    not only our children (a guardian watches runners it did not start).

    Linux: the process's pidfd. The portable path: the process holds an exclusive flock
    on a liveness file for all its life (runtime.runner.lifecycle takes it before the
    runner's identity is recorded); a thread here blocks on a shared lock of that file
    and writes a byte into a pipe once it is granted, which is when the process is gone.
    No timer: the kernel releases a dead process's locks."""

    __slots__ = ("_write", "by_pidfd", "fd")

    def __init__(self, fd: int, write: int = -1) -> None:
        self.fd, self._write = fd, write
        self.by_pidfd = write < 0
        """A pidfd: it survives its holder's exec(); the lock's thread does not."""

    @classmethod
    def open(cls, pid: int, liveness: str | None, *, prefer_pidfd: bool = True) -> ExitWatch | None:
        """A watch on `pid`, or None when there is no way to watch it (then the caller
        verifies it once more and treats it as gone if it is)."""
        opener = getattr(os, "pidfd_open", None)
        if opener is not None and prefer_pidfd and not portable():
            try:
                return cls(opener(pid))
            except OSError:
                return None
        if liveness is None:
            return None
        return cls._by_lock(liveness)

    @classmethod
    def _by_lock(cls, liveness: str) -> ExitWatch | None:
        try:
            held = os.open(liveness, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        return cls.on_lock(held)

    @classmethod
    def on_lock(cls, held: int) -> ExitWatch:
        """A watch readable once the exclusive flock on the open file `held` is gone
        (this takes `held` over: its thread closes it)."""
        import fcntl
        import threading

        read, write = os.pipe()
        os.set_blocking(read, False)

        def wait() -> None:
            try:
                fcntl.flock(held, fcntl.LOCK_SH)  # granted once the holder is gone
            except OSError:
                pass
            finally:
                os.close(held)
            try:
                os.write(write, b"x")
            except OSError:
                pass  # the watch was closed meanwhile

        threading.Thread(target=wait, name="actors-exit-watch", daemon=True).start()
        return cls(read, write)

    def close(self) -> None:
        os.close(self.fd)
        if self._write >= 0:
            os.close(self._write)


def lock_holder(fd: int) -> int | None:
    """The pid that holds an exclusive flock on the open file `fd`, from /proc/locks
    (Linux): the kernel's own record, which no state file can forge. None when nobody
    holds one, or where /proc/locks cannot tell (then use `ExitWatch` on the file)."""
    if portable():
        return None
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", "rb") as locks:
            table = locks.read().decode("ascii", "replace")
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # `N: FLOCK  ADVISORY  WRITE <pid> <maj:min:ino> 0 EOF`; a waiter's line has `->`
        if fields[1:2] == ["FLOCK"] and fields[3:4] == ["WRITE"] and fields[5:6] == [device]:
            return int(fields[4]) if fields[4].isdigit() else None
    return None


def watch_lock(fd: int) -> ExitWatch | None:
    """An exit watch on whoever holds an exclusive flock on the open file `fd` (a group's
    slot or queue entry, runtime.runner.slots): a pidfd on the holder /proc/locks names,
    proven to hold it still once the pidfd is open (so it is no recycled pid); else (the
    portable path, a holder it cannot name) a thread blocked on a shared lock of the
    file. None when nobody holds it. `fd` stays the caller's."""
    pid = lock_holder(fd)
    if pid is not None and hasattr(os, "pidfd_open"):
        watch = ExitWatch.open(pid, None)
        if watch is not None and lock_holder(fd) == pid:
            return watch
        if watch is not None:
            watch.close()
    return ExitWatch.on_lock(os.dup(fd)) if locked(fd) else None


def locked(fd: int) -> bool:
    """Whether some process holds an exclusive flock on the open file `fd` now: a shared
    lock tried on it and dropped at once (the caller holds none on this descriptor)."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


LIVENESS_FD = 3
"""The descriptor a runner is started with its liveness lock on, already held: spawn
takes the lock and hands it over (runtime.runs.launch), so it is held from before the
runner's identity is public (a lock the runner took itself would leave a window in
which a watcher opened on the spawner's record is granted its shared lock at once,
while the runner is still alive). runtime/runner/entry.py keeps this one descriptor
open and spells the same number."""


def hold_liveness(path: str, inherited: int | None = None) -> int:
    """Take the exclusive lock that says "this process is alive" (see ExitWatch) and
    return its descriptor; -1 where it cannot be taken (the watchers then verify).
    `inherited`: a descriptor the process was started with; when it is this very file
    (the spawner's lock, handed over) it is adopted, held since before the start; any
    other file there is kept from the process's children."""
    import fcntl

    if inherited is not None:
        adopted = _adopt(inherited, path)
        if adopted >= 0:
            return adopted
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -1
    return fd


def _adopt(fd: int, path: str) -> int:
    """`fd` if it is the open file at `path` and holds its exclusive lock (re-taking a
    lock of the same kind on the same open file is a no-op), no longer inheritable;
    else -1, with `fd` (if open at all) made non-inheritable."""
    import fcntl

    try:
        held, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except OSError:
        return -1
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return -1
    if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return -1
    return fd

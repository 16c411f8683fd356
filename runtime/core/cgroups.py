"""A run's processes held by the kernel: one cgroup v2 per run, killed whole.

Why: a process group or a session is a convention a program can leave. A command that
double-forks a daemon (`(setsid sleep 1000 &)`) leaves the runner's session and process
group and is reparented to init: no signal aimed at the run's group, session or
descendants reaches it. A cgroup is the kernel's own record of a process tree: every
process forked inside it stays inside it unless someone with write access to a cgroup
directory moves it out, and `cgroup.kill` (Linux 5.14) SIGKILLs every member atomically,
with no pid read first, so no recycled pid can be hit.

Where the run cgroups live: under a directory named `actors` in the highest cgroup v2
directory above our own that we own and may write (a systemd user's delegated
`user@UID.service`, or the hierarchy's root for root), so a run started from inside
another run is not nested in it (killing one run never kills the runs it spawned) and a
run outlives the terminal scope that started it. `$ACTORS_CGROUP` names another parent,
or `off`. Where none can be made (no cgroup v2, not delegated, a read-only mount, not
Linux), runs are supervised exactly as before: the session and identity proof of
runtime.core.members is the documented fallback.

A run's cgroup is `<parent>/actors/<root-tag>.<run id>.<instance>`: the root tag (a CRC
of the state root's real path) keeps two state roots' runs apart; all instances of one id in one root
share a prefix, so a kill finds every cgroup the run id ever had without reading a file
the run could have rewritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import time
from pathlib import Path

from runtime.core import config

BASE_NAME = "actors"
"""The directory under the delegated parent that holds every run's cgroup."""


def _cgroup2_mount() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on a
    hybrid system), from our mount table."""
    try:
        with open("/proc/self/mountinfo", "rb") as table:
            lines = table.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup2":
            fields = left.split(" ")
            if len(fields) > 4:
                return fields[4].replace("\\040", " ")
    return None


def _own_cgroup() -> str | None:
    """Our cgroup v2 path, relative to the hierarchy's root ("0::/path")."""
    try:
        with open("/proc/self/cgroup", "rb") as own:
            for line in own.read().decode(errors="replace").splitlines():
                if line.startswith("0::"):
                    return line[3:]
    except OSError:
        return None
    return None


def _ours(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and os.access(path, os.W_OK | os.X_OK)


def parent_dir() -> Path | None:
    """The cgroup directory the `actors` base goes in, or None (no cgroups here)."""
    setting = config.text(config.CGROUP).strip()
    if setting == "off":
        return None
    if setting and setting != "auto":
        return Path(setting) if _ours(setting) else None
    if config.flag(config.PORTABLE):
        return None
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return None
    path = os.path.normpath(mount + "/" + own.lstrip("/"))
    if not path.startswith(mount) or not _ours(path):
        return None
    while path != mount and len(path) > len(mount):
        up = os.path.dirname(path)
        if not _ours(up):
            break
        path = up
    return Path(path)


def root_tag(state_root: Path | str) -> str:
    """Eight hex digits naming a state root (a CRC-32 of its real path, which exists or
    not yet), so two roots' runs of one id never share a cgroup name. (zlib, not
    hashlib: this is on the runner's start, and a name needs no cryptography.)"""
    import zlib

    return f"{zlib.crc32(os.fsencode(os.path.realpath(str(state_root)))):08x}"


def run_prefix(state_root: Path | str, run_id: str) -> str:
    return f"{root_tag(state_root)}.{run_id}."


def path_for(state_root: Path | str, run_id: str, instance: str) -> Path | None:
    """Where this run instance's cgroup goes (None: no cgroups here)."""
    parent = parent_dir()
    if parent is None:
        return None
    return parent / BASE_NAME / f"{run_prefix(state_root, run_id)}{instance}"


def place(path: Path, pid: int) -> bool:
    """Make the run's cgroup and move `pid` (its runner) into it: spawn does it before it
    returns, so a run spawned from inside another never stays in its parent's cgroup
    (swept when the parent ends). False when it cannot be done: the run is supervised
    without a cgroup."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.parent, 0o755)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o755)
        _write(path / "cgroup.procs", str(pid))
    except OSError:
        return False
    return (path / "cgroup.kill").exists()


def join(path: Path) -> bool:
    """`place` this process (the runner, at its start: spawn placed it already unless
    that failed); its future children start inside."""
    return place(path, os.getpid())


def leave(path: Path) -> bool:
    """Move this process out of its run's cgroup, into the base that holds them all
    (so it can kill what is left of the run without killing itself)."""
    try:
        _write(path.parent / "cgroup.procs", str(os.getpid()))
    except OSError:
        return False
    return True


def release(pid: int) -> None:
    """Move `pid`, a process this one started that must outlive the run this one is
    part of (a host's link), out of the run's cgroup into the base that holds them all,
    as a runner leaves its own at its end; nothing when this process is in no run's
    cgroup. The run's end kills what its cgroup holds: this is not the run's."""
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return
    path = Path(os.path.normpath(mount + "/" + own.lstrip("/")))
    if path.parent.name != BASE_NAME or not str(path).startswith(mount):
        return
    with contextlib.suppress(OSError):
        _write(path.parent / "cgroup.procs", str(pid))


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def members(path: Path) -> list[int]:
    """The pids in the cgroup now (empty when it is gone)."""
    try:
        with open(path / "cgroup.procs", "rb") as procs:
            return [int(p) for p in procs.read().split()]
    except (OSError, ValueError):
        return []


def populated(path: Path) -> bool:
    """Whether any process is in the cgroup or below it (cgroup.events)."""
    try:
        with open(path / "cgroup.events", "rb") as events:
            return b"populated 1" in events.read()
    except OSError:
        return False


def groups_of(state_root: Path | str, run_id: str, recorded: str | None = None) -> list[Path]:
    """Every cgroup of this run id under this state root: what the base holds under the
    run's prefix, plus the path run.json recorded when it is one of those names (a run
    may have been started from another cgroup parent). Nothing else is ever returned: a
    rewritten record cannot aim a kill at a cgroup that is not this run's."""
    prefix = run_prefix(state_root, run_id)
    found: dict[str, Path] = {}
    parent = parent_dir()
    places = [parent / BASE_NAME] if parent is not None else []
    if recorded:
        chosen = Path(recorded)
        if chosen.name.startswith(prefix) and chosen.parent.name == BASE_NAME:
            places.append(chosen.parent)
    for base in places:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name[len(prefix) :].isalnum():
                found[str(base / name)] = base / name
    return list(found.values())


def kill(paths: list[Path], *, timeout_s: float = 5.0) -> int:
    """SIGKILL every process in these cgroups at once (cgroup.kill), wait until they are
    empty (their `populated 0` event, bounded), and remove them. Returns how many
    processes were in them."""
    count = 0
    for path in paths:
        count += len(members(path))
        with contextlib.suppress(OSError):
            _write(path / "cgroup.kill", "1")
    deadline = time.monotonic() + timeout_s
    for path in paths:
        wait_empty(path, max(0.0, deadline - time.monotonic()))
        remove(path)
    return count


def wait_empty(path: Path, timeout_s: float) -> bool:
    """Block until the cgroup holds no process (the kernel signals every change of
    cgroup.events with POLLPRI), at most `timeout_s`."""
    try:
        fd = os.open(path / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return True  # gone
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        deadline = time.monotonic() + timeout_s
        while True:
            if b"populated 0" in os.pread(fd, 4096, 0):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller.poll(int(left * 1000) + 1)
    except OSError as exc:
        return exc.errno == errno.ENODEV
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Remove an empty run cgroup (one still populated stays; nothing is raised)."""
    with contextlib.suppress(OSError):
        os.rmdir(path)

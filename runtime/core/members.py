"""Which processes belong to a run, proven at the instant they are signalled.

The rule every signal site follows: a process is signalled only when its identity is
proven now, never on a recorded number alone. Two proofs exist:

- **a live, verified leader** (`kill_tree`): the runner's recorded identity (pid, start
  ticks, boot id, argv, cwd) is verified, the runner is frozen, and its *current* session
  and descendants are read while it stays verified before and after the scan. A session
  whose leader is alive cannot have been recycled, so its members are the run's.
- **the run's marks, for orphans of a dead runner** (`kill_orphans`): a dead runner's
  recorded session id proves nothing (its number can belong to an unrelated program
  after pid reuse, and run.json can be edited). A member of that session is signalled
  only if its environment (`/proc/<pid>/environ`) carries this run's
  `ACTORS_RUN_INSTANCE` and `ACTORS_STATE_DIR` (the runner sets both for every command it
  starts), it started no earlier than the runner did, on this boot, and the session's
  leader is gone (a session with a live leader is not an orphaned run session).

What the marks cannot prove: a descendant that cleared or rewrote its environment
(`env -i`, a daemon that execs with a fresh one) is not recognised and survives; and
processes of the same user are no security boundary (one of them can start a program
with these variables set). The marks stop accidents, pid reuse and a forged run.json
from aiming our signals at a stranger; they are not an access control.
"""

from __future__ import annotations

import os
from typing import Any

from runtime.core import config
from runtime.core.process import (
    boot_id,
    freeze_and_kill,
    has_exited,
    read_proc,
    read_stat,
    send_verified,
    session_members,
    signal_exact,
    signals,
    verify,
    wait_gone,
)


def _environ(pid: int) -> list[bytes] | None:
    """The environment a process was started with, as `NAME=value` byte strings (None:
    gone, or another user's: unproven)."""
    data = read_proc(pid, "environ")
    return None if data is None else data.split(b"\0")


def _same_dir(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def carries(pid: int, marks: dict[str, str]) -> bool:
    """Whether `pid` was started with every NAME=value of `marks` in its environment
    (`ACTORS_STATE_DIR` compared as a path)."""
    env = _environ(pid)
    if env is None:
        return False
    found: dict[str, str] = {}
    for item in env:
        key, eq, value = item.partition(b"=")
        if eq and (name := key.decode(errors="replace")) in marks:
            found[name] = value.decode(errors="replace")
    for name, want in marks.items():
        got = found.get(name)
        if got is None:
            return False
        same = _same_dir(got, want) if name == config.STATE_DIR.name else got == want
        if not same:
            return False
    return True


def _leader_alive(sid: int) -> bool:
    stat = read_stat(sid)
    return stat is not None and stat.sid == sid and not has_exited(stat)


def proven_orphans(
    sid: int, marks: dict[str, str], *, since_ticks: int | None = None
) -> dict[int, int]:
    """Members of session `sid` proven to be this run's orphans now (pid -> start ticks)."""
    if not marks or _leader_alive(sid):
        return {}
    return {
        pid: ticks
        for pid, ticks in session_members(sid).items()
        if (since_ticks is None or ticks >= since_ticks) and carries(pid, marks)
    }


def run_marks(instance: str, state_dir: str) -> dict[str, str]:
    """What the runner puts in every command's environment that names this run."""
    return {config.RUN_INSTANCE.name: instance, config.STATE_DIR.name: state_dir}


def kill_orphans(
    sid: int | None,
    marks: dict[str, str],
    *,
    since_ticks: int | None = None,
    boot: str | None = None,
    rounds: int = 20,
) -> int:
    """SIGKILL the proven orphans of a dead runner's session (see the module docstring).

    Each is frozen first so none forks a replacement, then killed through a pidfd after
    its start ticks are re-read (a pid recycled since the scan is never hit). Returns how
    many were signalled. Nothing is killed across a reboot (all its processes are gone).
    """
    if not isinstance(sid, int) or sid <= 1 or (boot is not None and boot != boot_id()):
        return 0
    return freeze_and_kill(lambda: proven_orphans(sid, marks, since_ticks=since_ticks), rounds)


def kill_tree(identity: dict[str, Any], *, rounds: int = 20) -> int:
    """SIGKILL a verified live runner's whole tree: its session (when it leads one) and
    its descendants, then the runner. Membership is read while the runner is frozen and
    verified both before and after the scan, so the session cannot have been recycled.
    Returns how many processes were signalled (0 when the runner is not verified)."""
    pid = identity.get("pid")
    if not isinstance(pid, int):
        return 0
    if send_verified(identity, signals().SIGSTOP)[0] != "valid":
        return 0
    killed = 0
    for _ in range(rounds):
        stat = read_stat(pid)
        if stat is None or stat.start_ticks != identity.get("start_ticks", stat.start_ticks):
            break
        sid = pid if stat.sid == pid else -1  # not a leader: its descendants only
        members = session_members(sid, also_descendants_of=pid)
        members.pop(pid, None)
        if not members or verify(identity)[0] != "valid":
            break
        for member, ticks in members.items():
            signal_exact(member, ticks, signals().SIGSTOP)
        for member, ticks in members.items():
            if signal_exact(member, ticks, signals().SIGKILL):
                killed += 1
        wait_gone(list(members), timeout=1.0)
    if send_verified(identity, signals().SIGKILL)[0] == "valid":
        killed += 1
    wait_gone([pid], timeout=2.0)
    return killed

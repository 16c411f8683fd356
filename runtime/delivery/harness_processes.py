"""Which harness process serves which session: Claude Code keeps one process (and its
MCP servers) across `/clear`, which gives the session a new id.

The SessionStart hook records "harness process (pid + start time) -> current session"
under `<root>/harness-processes/`; `actors mcp`, a child of that process, walks its own
parent chain and takes the nearest record. The start time in the key means a recycled
pid never inherits a record; records of processes that are gone are removed whenever a
new one is written. The record a SessionStart replaces names the session the same
process served before: the one proof that the new session goes on from it
(runtime.delivery.succession).
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.core.ids import is_valid_id
from runtime.store.layout import StateRoot

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "busybox"})
_MAX_DEPTH = 32


def _identity(pid: int) -> str | None:
    """`pid-starttime` of a live process (a recycled pid gets another key)."""
    from runtime.core.process import read_stat

    stat = read_stat(pid)
    return None if stat is None else f"{pid}-{stat.start_ticks}"


def _comm(pid: int) -> str:
    from runtime.core.process import read_proc

    data = read_proc(pid, "comm") or b""
    return data.decode(errors="replace").strip()


def ancestors(pid: int) -> list[int]:
    """pid's parent, grandparent, ... up to (not including) init."""
    from runtime.core.process import read_stat

    chain: list[int] = []
    stat = read_stat(pid)
    while stat is not None and stat.ppid > 1 and len(chain) < _MAX_DEPTH:
        chain.append(stat.ppid)
        stat = read_stat(stat.ppid)
    return chain


def harness_process() -> int | None:
    """The process that ran this hook: the nearest ancestor that is not a shell (Claude
    Code runs hook commands through one)."""
    for pid in ancestors(os.getpid()):
        if _comm(pid) not in _SHELLS:
            return pid
    return None


def record_harness_process(root: StateRoot, session_id: str, pid: int | None = None) -> str | None:
    """Note that harness process `pid` (default: the one running this hook) now serves
    `session_id` (the SessionStart hook, again after `/clear`); never fails the hook.
    Returns the session the same process served before, if another one: the proof that
    `session_id` succeeds it (runtime.delivery.succession)."""
    import contextlib

    from runtime.core.errors import ActorsError
    from runtime.store.writes import ensure_dir, write_json_atomic

    pid = harness_process() if pid is None else pid
    key = None if pid is None else _identity(pid)
    if key is None:
        return None
    directory = root.harness_processes
    before = _session_in(directory / key)
    with contextlib.suppress(OSError, ActorsError):
        ensure_dir(directory)
        write_json_atomic(directory / key, {"session": session_id}, fsync=False)
        for name in os.listdir(directory):  # records of harness processes that are gone
            pid_text = name.split("-", 1)[0]
            if pid_text.isdigit() and _identity(int(pid_text)) != name:
                with contextlib.suppress(OSError):
                    os.unlink(directory / name)
    return before if before != session_id else None


def _session_in(path: Path) -> str | None:
    """The session a harness-process record names, if it is readable and valid."""
    from runtime.core.errors import ActorsError
    from runtime.store.reads import read_json

    try:
        record = read_json(path)
    except (OSError, ActorsError):
        return None
    session = record.get("session") if isinstance(record, dict) else None
    return session if isinstance(session, str) and is_valid_id(session) else None


def session_of_ancestors(root: StateRoot) -> str | None:
    """The session the nearest recorded harness ancestor of this process serves."""
    directory = root.harness_processes
    if not directory.is_dir():
        return None
    for pid in ancestors(os.getpid()):
        key = _identity(pid)
        session = None if key is None else _session_in(directory / key)
        if session is not None:
            return session
    return None

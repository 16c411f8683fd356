"""Coordinator sessions: where follow-ups go, and their durable inbox.

A session is registered with a harness name and adapter options
(`sessions/<id>/session.json`); an unregistered owner (a plain shell, `user:<login>`)
still gets a session directory with the `file` adapter, so no follow-up is ever dropped
for want of a registration. Every follow-up is first appended to the session's
`inbox.jsonl` (fsync'd, deduplicated by delivery id under a lock); adapters only ever
try to surface what is already durable there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.errors import ActorsError, BadInput, NotFound, StateDamaged
from runtime.core.ids import is_session_id, is_valid_id, now_iso
from runtime.messaging.durable_inbox import DurableInbox
from runtime.store import safe
from runtime.store.appends import append_jsonl, encode_line
from runtime.store.layout import SessionPaths, StateRoot, session_key, session_paths
from runtime.store.reads import read_json
from runtime.store.trust import trusted_dir
from runtime.store.writes import DiskWriteError, disk_error, ensure_dir, write_json_atomic

if TYPE_CHECKING:
    from runtime.delivery.records import SessionEntry
    from runtime.messaging.envelope import Envelope


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A session.json of the shape `update_session` writes, else (None, why it is unusable)."""
    try:
        record = read_json(path)
    except StateDamaged as exc:
        return None, exc.message
    if record is None:
        return None, None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("id"), str)
        and isinstance(record.get("harness"), str)
        and isinstance(record.get("options", {}), dict)
    ):
        return None, f"{path} is not a session record (id, harness and options)"
    return record, None


def load_session(root: StateRoot, owner: str) -> dict[str, Any]:
    """The session record; an unregistered owner is a `file` session, and so is one whose
    session.json is damaged (its follow-ups stay durable in the inbox; `damaged` says why)."""
    record, damaged = _read_record(session_paths(root, owner).record)
    if record is not None:
        return record
    fallback: dict[str, Any] = {"id": owner, "harness": "file", "options": {}, "registered": False}
    if damaged:
        fallback["damaged"] = damaged
    return fallback


SessionChange = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""What `update_session` applies: the current record (as `load_session` returns it) in,
the record to write out, or None to leave session.json as it is."""


def update_session(
    root: StateRoot, owner: str, change: SessionChange, *, wait_s: float | None = None
) -> dict[str, Any]:
    """The one read-modify-write of session.json: under the session's `.session.lock`
    the record is read, `change` decides, and what it returns is written atomically;
    returns the record as it now is. Several processes update one record (the harness
    hooks of one session, `actors session register`, `actors mcp`, a spawn recording
    its socket): without the lock, one writing between another's read and write would
    have its update overwritten.

    The lock is the innermost of a session's locks: it may be taken while holding
    `.deliver.lock` or `.inbox.lock`, and nothing else is taken while it is held, so
    `change` must not take a lock (nor do slow work: compute what it needs first). With
    `wait_s` (a hook's ACTORS_HOOK_LOCK_WAIT), a lock held longer raises LockBusy and
    nothing is written; without it the wait is `locked`'s (blocking, or the test bound).

    A record that is damaged reads as the unregistered fallback; what `change` makes of
    it replaces the bytes (without the fallback's `damaged` note). A session this call
    would have created but did not write (`change` returned None, or the write failed:
    a full disk) leaves no directory behind."""
    paths = session_paths(root, owner)
    made = [d for d in (root.sessions, paths.dir) if not os.path.lexists(d)]
    try:
        place, fd = _lock_record(paths, wait_s)
    except BaseException:
        _unmake(made)  # a lock file left there is someone else's: then not empty
        raise
    written = False
    try:
        current = load_session(root, owner)
        record = change(current)
        if record is None:
            return current
        record = {k: v for k, v in record.items() if k != "damaged"}
        write_json_atomic(paths.record, record)
        written = True
        return record
    finally:
        if made and not written:  # the lock file goes first, while still held
            with contextlib.suppress(OSError):  # (through the descriptor: none is free now)
                os.unlink(paths.record_lock.name, dir_fd=place)
        os.close(fd)  # the lock goes with the descriptor
        os.close(place)
        if made and not written:
            _unmake(made)


def _lock_record(paths: SessionPaths, wait_s: float | None) -> tuple[int, int]:
    """Descriptors of the session's directory and of its `.session.lock`, locked: the
    lock file now at its path (`lock_current`: a holder that made the directory and then
    wrote nothing removes the lock file and the directory again, and a waiter that got
    the removed file's lock tries again). The directory's is kept to remove the lock
    file with when no descriptor is left (out of them, the update failed)."""
    from runtime.store.appends import lock_current

    for _ in range(8):
        ensure_dir(paths.dir)
        try:
            place = safe.open_dir(paths.dir)
        except FileNotFoundError:
            continue  # removed again by a holder that wrote nothing
        except OSError as exc:
            raise disk_error("open", paths.dir, exc) from exc
        try:
            return place, lock_current(paths.record_lock, wait_s=wait_s)
        except DiskWriteError:
            os.close(place)
            if os.path.lexists(paths.dir):
                raise
        except BaseException:
            os.close(place)
            raise
    raise DiskWriteError(f"{paths.dir} was removed while waiting for its lock; try again")


def _unmake(made: list[Path]) -> None:
    """Remove the directories `update_session` created for a session it wrote nothing
    to, unless someone else uses them now (not empty)."""
    for directory in reversed(made):
        with contextlib.suppress(OSError, ActorsError):  # not empty: someone else uses it now
            safe.rmdir(directory)


def register_session(
    root: StateRoot,
    ident: str,
    harness: str,
    options: dict[str, str],
    *,
    reach: bool = True,
    keep: Callable[[dict[str, Any]], bool] | None = None,
    **extra: str,
) -> dict[str, Any]:
    """The one way a session is registered (`actors session register`, and `actors mcp`
    registering the Codex thread or OpenCode session that called it): the options are
    checked against what the adapter declares (and, with `reach`, the target must answer)
    before session.json is written, replacing the record in one locked update
    (`update_session`), unless `keep` holds for the record found there then. Raises
    BadInput (one line) and writes nothing."""
    from runtime.delivery.contract import AdapterError
    from runtime.delivery.registry import check_registration

    if not is_session_id(ident):  # what --session and $ACTORS_SESSION would refuse
        raise BadInput(
            f"invalid session id {ident[:80]!r}",
            hint="use letters, digits, '._-' (or user:<login> with the same characters)",
        )
    session_key(ident)
    try:
        cls, checked = check_registration(harness, options, reach=reach)
    except AdapterError as exc:
        raise BadInput(str(exc)) from None
    caps = cls.capabilities
    record: dict[str, Any] = {
        "id": ident,
        "harness": harness,
        "options": checked,
        "registered": True,
        "capabilities": {
            "wake_mode": caps.wake_mode,
            "level": caps.level,
            "modes": list(caps.modes),
        },
        **extra,
        "created_at": now_iso(),
        "last_seen": now_iso(),
    }

    def change(current: dict[str, Any]) -> dict[str, Any] | None:
        if keep is not None and keep(current):
            return None
        return {**record, **{k: current[k] for k in SESSION_HISTORY if k in current}}

    return update_session(root, ident, change)


SESSION_HISTORY = ("predecessors", "successor", "created_at")
"""What a registration keeps of the record it replaces: the sessions this one succeeded
(runtime.delivery.succession; its ownership of their runs rests on them), the one it
went on to, and when it was first seen. A re-registration changes how the session is
reached, never whose runs it owns."""


def list_sessions(root: StateRoot) -> list[dict[str, Any]]:
    out = []
    for name in sorted(safe.subdirs(root.sessions)):
        if is_valid_id(name):
            trusted_dir(root.sessions / name, root=root.path)  # another user's: refused
            record, damaged = _read_record(SessionPaths(root.sessions / name).record)
            if record is None:
                record = {"id": name, "harness": "file", "registered": False}
                if damaged:
                    record["damaged"] = damaged
            out.append(record)
    return out


def forget_session(root: StateRoot, owner: str) -> None:
    paths = session_paths(root, owner)
    if not paths.dir.is_dir():
        raise NotFound(f"no session {owner}", hint="`actors session ls` lists them")
    safe.rmtree(paths.dir)  # from its parent's descriptor, never through a link


class SessionInbox(DurableInbox[dict[str, Any]]):
    """The durable, deduplicated follow-up inbox of one session: the durable journal
    (runtime.messaging.durable_inbox) with one entry per delivery id, taken by one
    reader at a time, then read, given back or moved to a successor.

    Its sidecar lock (`.inbox.lock`) is held by every appender, since an append decides
    (is this delivery id new?), and by takers and movers; a reader behind
    `read_barrier` therefore also waits for an appender of an older version, which rang
    under this lock alone. The journal is never compacted (deduplication spans its
    whole history)."""

    open_states = frozenset({"unread", "taken"})
    after_ring = "sessions.append.after_ring"
    after_write = "sessions.append.after_write"

    def __init__(self, paths: SessionPaths) -> None:
        super().__init__(paths.inbox, paths.doorbells, paths.inbox_lock)
        self.paths = paths

    def append(self, delivery_id: str, envelope: Envelope, mode: str) -> bool:
        """Append unless this delivery id is already there; True when appended."""
        ensure_dir(self.paths.dir)
        with self.deciding():
            appended = self.append_locked(delivery_id, envelope, mode)
        if appended:
            self.ring_wake(delivery_id)
        return appended

    def append_locked(self, delivery_id: str, envelope: Envelope, mode: str) -> bool:
        """`append` for a caller that holds the inbox lock (and rings `ring_wake` after):
        the lock makes the check for the delivery id and the append one decision.

        The append is the journal's ringing append (docs/messaging.md, Doorbells): every
        doorbell is rung under the journal's flock before the line is written and
        fsynced, so an appender killed after its write has already rung, and one killed
        before it appended nothing; a waiter reads after `read_barrier`. No timer stands
        behind the doorbell."""
        if delivery_id in self.refresh():
            return False  # a second submission of this delivery id: nothing at all
        entry: SessionEntry = {
            "id": delivery_id,
            "state": "unread",
            "mode": mode,
            "queued_at": now_iso(),
            "envelope": envelope,
        }
        self.append_ringing(encode_line(entry))
        return True

    def ring_wake(self, delivery_id: str) -> None:
        """The advisory wake-file line a harness watches (Claude Code's FileChanged)."""
        with contextlib.suppress(OSError, ActorsError):  # advisory: the entry is durable
            append_jsonl(self.paths.wake, {"ts": now_iso(), "id": delivery_id})

    def unread(self) -> list[dict[str, Any]]:
        """Unread entries, and those taken by a reader that is gone, in arrival order."""
        entries = self.refresh()
        return [entries[i] for i in self._open if _unread(entries[i])]

    def take(self) -> list[dict[str, Any]]:
        """Every unread entry, taken by this process in one locked step: no other reader
        gets them while this one writes them out. Then `mark_read` once they are out,
        or `give_back` when they could not be; a reader that dies in between leaves
        them unread again (a taker is a process identity, verified on every read)."""
        from runtime.core.process import capture

        if not self.paths.inbox.exists():
            return []  # nothing was ever delivered: a reader creates nothing
        with self.reading() as fd:
            unread = [dict(e) for e in self.unread()]  # as they were when taken
            if unread and fd is not None:
                change = {"state": "taken", "taken_by": capture(os.getpid()), "taken_at": now_iso()}
                self.append_changes([{"id": e["id"], **change} for e in unread], fd=fd)
        return unread

    def give_back(self, ids: list[str]) -> None:
        """Entries taken but not written out (the output failed): unread again."""
        self._change(ids, {"state": "unread"})

    def drain(self) -> list[dict[str, Any]]:
        """Every unread entry, taken and marked read at once (for a caller that has
        already shown them)."""
        unread = self.take()
        self.mark_read([e["id"] for e in unread])
        return unread

    def mark_read(self, ids: list[str]) -> None:
        self._change(ids, {"state": "read", "read_at": now_iso()}, fsync=True)

    def mark(self, ids: list[str], state: str, stamp_field: str, **extra: str) -> None:
        """One state line per id (`moved`, with the session it went to), fsynced."""
        self._change(ids, {"state": state, stamp_field: now_iso(), **extra}, fsync=True)

    def _change(self, ids: list[str], change: dict[str, Any], *, fsync: bool = False) -> None:
        """One state change of several entries, appended as one write."""
        self.append_changes([{"id": i, **change} for i in ids], fsync=fsync)


def _unread(entry: dict[str, Any]) -> bool:
    """Unread, or taken by a reader that is gone (it died before writing them out)."""
    state = entry.get("state")
    if state != "taken":
        return state == "unread"
    from runtime.core.process import verify

    taker = entry.get("taken_by")
    return not isinstance(taker, dict) or verify(taker)[0] != "valid"

"""A conversation that goes on under another session id keeps its runs and follow-ups.

Claude Code keeps one process (and its MCP servers) across `/clear`, which gives the
conversation a new session id; `/resume` inside a running Claude switches the process to
another one. The SessionStart hook sees the switch in the harness-process record
(runtime.delivery.harness_processes): the record of the same process, keyed by its pid
and start time and written only by that hook, named the session it served before. That
is the only proof of a succession: never a hook field, a tool argument or anything a
model or another user can write.

- The new session's session.json lists its `predecessors`. Ownership
  (runtime.runs.ownership) treats a session and its predecessors, transitively, as one
  principal, so the new id stops and messages the runs the old one started.
- The old session's session.json names its `successor`. A follow-up submitted to a
  session with a successor goes to the live end of the chain (`live_session`), whose
  harness is woken; the old session's unread follow-ups are moved there (`forward`):
  appended to the successor's inbox under the same delivery id (deduplicated there),
  then marked `moved` in the old inbox and journal, under both inbox locks. A crash
  between the steps is finished by the next `forward` (the append is a no-op the second
  time), and a reader of the old inbox forwards first, so each follow-up is unread in
  one inbox only and is read once.
- A session that starts again (`claude --resume`, a fresh process) drops its
  `successor`: it is live, and its own follow-ups come to it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.core.errors import ActorsError
from runtime.core.ids import is_valid_id
from runtime.delivery.sessions import SessionInbox, load_session, update_session
from runtime.store.appends import locked
from runtime.store.layout import StateRoot, session_paths
from runtime.store.writes import ensure_dir

if TYPE_CHECKING:
    from runtime.delivery.engine import DeliveryRunner

MAX_CHAIN = 64
"""The most links followed (a chain of `/clear`s longer than this is cut there)."""


def _record(root: StateRoot, session: str) -> dict[str, Any]:
    try:
        return load_session(root, session)
    except (ActorsError, OSError):
        return {}


def successor_of(root: StateRoot, session: str) -> str | None:
    found = _record(root, session).get("successor")
    if isinstance(found, str) and found != session and is_valid_id(found):
        return found
    return None


def live_session(root: StateRoot, session: str) -> str:
    """The end of `session`'s successor chain (itself when it has none)."""
    seen, current = {session}, session
    while len(seen) < MAX_CHAIN:
        following = successor_of(root, current)
        if following is None or following in seen:
            break
        seen.add(following)
        current = following
    return current


def lineage(root: StateRoot, session: str) -> set[str]:
    """`session` and every session it succeeded, transitively: one principal."""
    found, queue = {session}, [session]
    while queue and len(found) < MAX_CHAIN:
        earlier = _record(root, queue.pop()).get("predecessors")
        for previous in earlier if isinstance(earlier, list) else []:
            if isinstance(previous, str) and is_valid_id(previous) and previous not in found:
                found.add(previous)
                queue.append(previous)
    return found


def succeed(
    root: StateRoot, old: str, new: str, runner: DeliveryRunner, *, wait_s: float | None = None
) -> list[str]:
    """`new` now serves the harness process that served `old` (the SessionStart hook, after
    it saved `new`'s record): link the two and move `old`'s unread follow-ups to `new`'s
    live end (journaled through `runner`). Returns the delivery ids moved. Each record is
    changed in one locked update, waiting at most `wait_s` for its lock (a hook's wait)."""
    if old == new:
        return []

    def link_back(record: dict[str, Any]) -> dict[str, Any] | None:
        earlier = [p for p in record.get("predecessors") or [] if isinstance(p, str)]
        if old in earlier:
            return None
        record["predecessors"] = [*earlier, old][-MAX_CHAIN:]
        return record

    def link_on(record: dict[str, Any]) -> dict[str, Any] | None:
        if record.get("successor") == new:
            return None
        record["successor"] = new
        return record

    update_session(root, new, link_back, wait_s=wait_s)
    old_paths = session_paths(root, old)
    ensure_dir(old_paths.dir)
    # under the old inbox's lock: an append to the old session either comes before (and
    # is moved below) or sees the successor and forwards itself (runtime.delivery.engine);
    # the record's lock is taken inside it (the innermost lock: update_session)
    with locked(old_paths.inbox_lock, timeout_s=wait_s):
        update_session(root, old, link_on, wait_s=wait_s)
    return forward(root, old, runner)


def forward(root: StateRoot, session: str, runner: DeliveryRunner) -> list[str]:
    """Move `session`'s unread follow-ups to its live successor, if it has one, each
    journaled through `runner` (created there, moved here); the delivery ids moved."""
    live = live_session(root, session)
    if live == session:
        return []
    source, target = session_paths(root, session), session_paths(root, live)
    ensure_dir(source.dir)
    ensure_dir(target.dir)
    first, second = sorted((source, target), key=lambda paths: str(paths.dir))
    appended: list[str] = []
    with locked(first.inbox_lock), locked(second.inbox_lock):
        unread = SessionInbox(source).unread()
        into = SessionInbox(target)
        for entry in unread:
            mode = str(entry.get("mode") or "immediate")
            if into.append_locked(entry["id"], entry["envelope"], mode):
                appended.append(entry["id"])
                runner.journal_created(live, entry["id"], entry["envelope"], mode)
        ids = [e["id"] for e in unread]
        SessionInbox(source).mark(ids, "moved", "moved_at", to=live)
        for ident in ids:
            runner.journal_moved(session, ident, live)
    for ident in appended:
        into.ring_wake(ident)
    return ids


def settle(root: StateRoot, session: str, delivery_id: str, runner: DeliveryRunner) -> str:
    """After `delivery_id` was appended to `session` and journaled `created` there: when a
    succession came in between, move it along (`forward`) and make sure the old journal
    ends it as `moved` (a move that ran between our append and our `created` line wrote
    its own `moved` first). Returns the session that holds it now."""
    forward(root, session, runner)
    live = live_session(root, session)
    if live == session:
        return session
    entry = next(
        (e for e in SessionInbox(session_paths(root, session)).entries() if e["id"] == delivery_id),
        None,
    )
    moved = entry is not None and entry.get("state") == "moved"
    if moved and runner.states(session).get(delivery_id, {}).get("state") != "moved":
        runner.journal_moved(session, delivery_id, str((entry or {}).get("to") or live))
    return live

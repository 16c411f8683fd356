"""The hooks of the actors pi extension (`actors install pi` writes it; its source is
adapters/pi/install.py): what a user's own interactive pi runs, from inside its process,
to be reached by actors with no host process of ours.

`actors hook pi-session-start` (JSON on stdin: `session_id`, `cwd`, `session_file`): pi
started, resumed or replaced a session. Registers it as the actors session `pi-<pi's
session id>` (harness `pi_tui`), records that this pi process serves it (so the
`actors mcp` pi started acts for it, and after `/new` or `/resume` the new session
succeeds the old one, as after Claude Code's `/clear`: runtime.delivery.succession),
creates its wake file and answers `{"session": ID, "wake": PATH}` for the extension to
watch (fs.watch: no timer).

`actors hook pi-wake` (JSON on stdin: `session`): the wake file changed. Hands every
unread follow-up over as one fenced text (runtime.delivery.boundary.hand_over: answer
first, then marked read and journaled delivered under the session's locks, so a racing
wake or an `actors inbox read` never takes the same entry; `manual` ones wait for
`actors flush`), `{"text": ..., "deliver_as": "steer" | "followUp"}`, which the
extension sends into pi as a user message: an idle pi starts a turn with it at once, a
busy one gets it after the running turn's tool calls (`steer`, for an `immediate`
follow-up) or when the turn ends (`followUp`). Nothing is printed when nothing waits.
`actors hook pi-serve` is the same, kept running by the extension for its pi process:
one request line in, one answer line out (`serve`), so a wake pays no interpreter start.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from runtime.delivery.boundary import (
    held_at_boundary,
    pick_turn_end,
    record_wake,
    session_of,
    take_over,
    touch_wake,
)
from runtime.store.layout import StateRoot, session_paths

HARNESS = "pi_tui"
PREFIX = "pi-"
"""Actors session ids of pi sessions: `pi-<pi's session id>` (as Codex threads get
`codex-<thread>`), so a pi id never names a session of another harness."""
VIA = "pi extension"
"""The wake log's `via` for a follow-up the extension sent in as a user message."""


def session_start(data: dict[str, Any]) -> None:
    """Register the pi session, take over from the one this pi process served before,
    and answer with the session id and the wake file to watch (nothing for bad input)."""
    from runtime.core.ids import is_valid_id
    from runtime.store.writes import ensure_dir

    given = data.get("session_id")  # pi's own id (a UUID): an id by itself, then prefixed
    if not isinstance(given, str) or not is_valid_id(given) or len(given) > 120:
        return
    ident = f"{PREFIX}{given}"
    root = StateRoot.from_env()
    _register(root, ident, data)
    take_over(root, ident, "pi-session-start")
    paths = session_paths(root, ident)
    ensure_dir(paths.dir)
    touch_wake(paths.wake)
    sys.stdout.write(json.dumps({"session": ident, "wake": str(paths.wake)}) + "\n")
    sys.stdout.flush()


def _register(root: StateRoot, ident: str, data: dict[str, Any]) -> None:
    """The session's record, as pi started it (again)."""
    from runtime.core import config
    from runtime.core.ids import now_iso
    from runtime.delivery.sessions import update_session

    found: dict[str, str | None] = {}
    for key in ("cwd", "session_file"):
        value = data.get(key)
        found[key] = value if isinstance(value, str) and len(value) <= 4096 else None

    def change(record: dict[str, Any]) -> dict[str, Any]:
        record.update(id=ident, harness=HARNESS, registered=True, last_seen=now_iso(), **found)
        record.setdefault("options", {})
        record.pop("successor", None)  # running again: its own follow-ups come to it
        record.setdefault("created_at", now_iso())
        return record

    update_session(root, ident, change, wait_s=config.seconds(config.HOOK_LOCK_WAIT))


def pick_wake(entry: dict[str, Any], state: dict[str, Any]) -> bool:
    """What a wake hands over: every unread follow-up but `manual` ones not yet flushed
    (and boundary-held ones, which pi_tui does not accept)."""
    return pick_turn_end(entry, state) and not held_at_boundary(entry, state)


def wake(data: dict[str, Any], seq: int | None = None) -> bool:
    """Hand the unread follow-ups over for the extension to send in (module docstring);
    `seq` is echoed in the answer (`serve`). True when an answer was written."""
    from runtime.delivery.boundary import hand_over

    session = session_of(data, "session", env_first=False)
    if not session.startswith(PREFIX):
        return False
    root = StateRoot.from_env()
    modes: dict[str, str] = {}

    def pick(entry: dict[str, Any], state: dict[str, Any]) -> bool:
        chosen = pick_wake(entry, state)
        if chosen:
            modes[entry["id"]] = str(entry.get("mode") or "immediate")
        return chosen

    def answer(text: str) -> dict[str, Any]:
        steer = "immediate" in modes.values()
        echoed = {} if seq is None else {"seq": seq}
        return {**echoed, "text": text, "deliver_as": "steer" if steer else "followUp"}

    ids = hand_over(root, session, boundary=VIA, harness=HARNESS, pick=pick, answer=answer)
    if ids:
        record_wake(session_paths(root, session), [{"id": i} for i in ids], via=VIA)
    return bool(ids)


SERVE_LINE_CAP = 64 * 1024
"""Bytes of one `serve` request line read at most (the extension's are ~100)."""


def serve() -> None:
    """`actors hook pi-serve`: `wake` for every JSON line on stdin (`{"seq": N,
    "session": ID}`), answered with exactly one line carrying the same `seq` (the
    hand-over, else `{"seq": N}`), until stdin ends. The extension keeps one running per
    pi process, so a wake costs a line each way, not an interpreter start and its
    imports (~100 ms); a request that fails is noted on stderr and answered empty."""
    from runtime.core.bounded_json import decode
    from runtime.delivery.boundary import note_failure

    stdin = sys.stdin.buffer
    while line := stdin.readline(SERVE_LINE_CAP):
        seq = None
        try:
            data = decode(line)
            data = data if isinstance(data, dict) else {}
            given = data.get("seq")
            seq = given if isinstance(given, int) and not isinstance(given, bool) else None
            if wake(data, seq):
                continue
        except Exception as exc:  # one request failed: the next one is served
            note_failure("pi-serve", f"{type(exc).__name__}: {exc}")
        sys.stdout.write(json.dumps({"seq": seq}) + "\n")
        sys.stdout.flush()

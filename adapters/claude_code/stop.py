"""Claude Code's Stop hook (`actors hook stop`): a headless `claude -p` coordinator waits
for its runs instead of exiting.

`claude -p "PROMPT"` ends its process when its turn does, so a run it started would
report to a session that is gone (the follow-up waits, unread, for a next session). When
the session is headless (adapters/claude_code/headless.py), owns runs that are still live or has unread
follow-ups, this hook holds the finished turn open: it sleeps on the session's inbox
doorbell and on its runs' runners (runtime.runner.guardian.Guard: a pidfd each, no
timer), and as soon as a follow-up is unread answers `{"decision": "block", "reason":
TEXT}`, TEXT being the follow-ups fenced exactly as every boundary hook renders them
(runtime.delivery.boundary.hand_over: answered, then marked read and journaled delivered
under the session's locks, so a follow-up is handed over once). Claude gives the model
TEXT and the turn goes on; at its next end this hook runs again. It answers nothing, and
Claude exits, once the session's last run is settled with nothing unread, or after
ACTORS_STOP_WAIT seconds (600 by default).

Never for a session someone drives: an interactive Claude, or a `claude -p` fed prompts
on stdin (`--input-format stream-json`, an SDK host) is never held (the messaging socket
or the doorbell wakes those). Claude ends a turn its Stop hooks continued
CLAUDE_CODE_STOP_HOOK_BLOCK_CAP times in a row (8 by default) without showing the last
answer to the model, so the hook counts its answers (`stop_blocks`) and stops holding
before that cap: what is left stays unread for `actors inbox read` or the next session.

This module imports only the standard library at the top: the hook runs at the end of
every turn of every Claude session, and the interactive ones leave after one look at
their environment.
"""

from __future__ import annotations

import os
from typing import Any

from adapters.claude_code.headless import headless

DEFAULT_BLOCK_CAP = 8
"""Claude Code 2.1.331's default CLAUDE_CODE_STOP_HOOK_BLOCK_CAP."""


def block_cap(environ: dict[str, str] | None = None) -> int:
    """How many answers in a row Claude honours (0: no cap)."""
    raw = (os.environ if environ is None else environ).get("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP")
    try:
        return max(0, int(raw)) if raw else DEFAULT_BLOCK_CAP
    except ValueError:
        return DEFAULT_BLOCK_CAP


def stop(data: dict[str, Any]) -> None:
    """The hook (see the module): hold a headless session's turn open until a follow-up
    is unread (answer it) or nothing is left to wait for (answer nothing)."""
    if not headless():
        return
    from runtime.core import config
    from runtime.delivery.boundary import note_failure, session_of
    from runtime.delivery.sessions import SessionInbox
    from runtime.store.layout import StateRoot, session_paths

    session_id = session_of(data, "session_id", env_first=False)
    if not session_id:
        return
    root = StateRoot.from_env()
    paths = session_paths(root, session_id)
    if not paths.dir.is_dir():
        return  # a session of ours starts with its SessionStart hook: nothing to wait for
    blocks, before = _blocks_so_far(paths.stop_blocks, data)
    if before:  # the turn our last answer continued has ended: its completion (doctor D7)
        _note(paths.wakes, before, completed=True)
    cap = block_cap()
    if cap and blocks >= cap:
        if SessionInbox(paths).unread() or unsettled(root, session_id):
            note_failure(
                "stop",
                f"Claude ends a turn continued {cap} times in a row"
                " (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP): what is left stays unread for"
                f" `actors inbox read --session {session_id}`",
            )
        return
    wait = config.seconds(config.STOP_WAIT)
    _warm()
    if root.hosts.is_dir():  # runs of ours on hosts: their links carry follow-ups home
        from runtime.hosts.link import ensure_links

        ensure_links(root, session_id)
    if not _hold(root, session_id, blocks, wait) and wait > 0:
        note_failure(
            "stop",
            f"waited {wait:g} s (ACTORS_STOP_WAIT) with runs still live: their follow-ups"
            f" wait for `actors inbox read --session {session_id}` or the session's next start",
        )


def _hold(root: Any, session_id: str, blocks: int, wait: float) -> bool:
    """Sleep on the inbox doorbell and the runners of the session's runs; answer as soon
    as a follow-up is unread. False when `wait` ran out with runs still live."""
    import contextlib
    import select
    import time

    from adapters.claude_code.hooks import HARNESS
    from runtime.delivery.boundary import hand_over, pick_turn_end
    from runtime.delivery.sessions import SessionInbox
    from runtime.messaging.doorbells import doorbell
    from runtime.runner.guardian import Guard
    from runtime.store.layout import session_paths

    paths = session_paths(root, session_id)
    deadline = time.monotonic() + wait

    def count(ids: list[str]) -> bool:
        """Before answering (an answer past Claude's cap would be lost): the count, and
        in the wake log the turn it continues (doctor D4-D6); Claude waits for our exit,
        so nothing of ours is left to do after the answer but the hand-over's marks."""
        if not _write_blocks(paths.stop_blocks, blocks + 1, ids):
            return False
        _note(paths.wakes, ids)
        return True

    def handed_over() -> list[str]:
        SessionInbox(paths).read_barrier()  # the doorbell rings inside the appender's lock
        return hand_over(
            root,
            session_id,
            boundary="Stop",
            harness=HARNESS,
            pick=pick_turn_end,
            answer=lambda text: {"decision": "block", "reason": text},
            before_output=count,
        )

    with doorbell(paths.doorbells) as fd, contextlib.closing(Guard(root, session_id)) as guard:
        guard.scan()  # its bell armed first; runs whose runner died are folded now
        live = unsettled(root, session_id)
        while not handed_over():
            live = {run for run in live if not settled(root, run)}
            if not live:
                # settled after the look above: a run's follow-up is in the inbox before
                # its marker, so one more look finds it
                handed_over()
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            poller = select.poll()
            for watched in [fd, *guard.fds()]:
                poller.register(watched, select.POLLIN)
            for ready, _ in poller.poll(int(remaining * 1000) + 1):
                if ready == fd:
                    with contextlib.suppress(BlockingIOError):
                        os.read(fd, 65536)
                    continue
                if ready == guard.bell.read:  # a runner of the session started: look again
                    live = unsettled(root, session_id)
                guard.handle(ready)  # a runner ended (or died: its run is folded)
    return True


def unsettled(root: Any, owner: str) -> set[str]:
    """The runs of `owner` not yet settled: not ended, or ended with their follow-up not
    yet submitted (the guardian's test: the follow-up marker)."""
    from runtime.views.index import list_runs

    return {
        s["run"]
        for s in list_runs(root)
        if s.get("owner_id") == owner and not settled(root, s["run"])
    }


def settled(root: Any, run: str) -> bool:
    """The run's follow-up is submitted (or not owed): its marker exists, written once
    the follow-up is in the session's inbox. A run gone from runs/ is settled too."""
    paths = root.run(run)
    return paths.followup.exists() or not paths.dir.exists()


def _warm() -> None:
    """Import the hand-over's modules before waiting, so a wake costs only its work."""
    import runtime.delivery.contract
    import runtime.delivery.engine
    import runtime.delivery.render
    import runtime.store.writes  # noqa: F401


def _blocks_so_far(path: Any, data: dict[str, Any]) -> tuple[int, list[str]]:
    """Answers in a row so far, and the delivery ids the last one handed over: none when
    Claude says this stop follows no answer of a Stop hook (`stop_hook_active` false: a
    new prompt's turn), else what the file keeps."""
    if data.get("stop_hook_active") is not True:
        _write_blocks(path, 0, [])
        return 0, []
    from runtime.store.reads import read_json

    try:
        found = read_json(path)
    except Exception:  # damaged: count as many as can be, so nothing is answered past the cap
        return 1 << 30, []
    found = found if isinstance(found, dict) else {}
    blocks, handed = found.get("blocks"), found.get("handed")
    if not isinstance(handed, list) or not all(isinstance(i, str) for i in handed):
        handed = []
    return (blocks if isinstance(blocks, int) and blocks >= 0 else 0), handed


def _write_blocks(path: Any, blocks: int, handed: list[str] | None = None) -> bool:
    """Keep the count (and what the last answer handed over); False when it cannot be
    kept: the hook then answers nothing rather than miscount."""
    from runtime.store.writes import write_json_atomic

    try:
        # not fsynced: the count matters only to the Claude process now running
        write_json_atomic(path, {"blocks": blocks, "handed": handed or []}, fsync=False)
    except Exception:  # a full disk, a planted link
        return False
    return True


def _note(path: Any, ids: list[str], **extra: Any) -> None:
    """A line in the session's wake log (`actors doctor delivery` judges from it): the
    Stop hook continued a turn with these follow-ups, or (`completed`) that turn ended.
    Never fails the hook."""
    import contextlib

    from runtime.core.ids import now_iso
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import LOG

    with contextlib.suppress(Exception):
        append_jsonl(
            path, {"ts": now_iso(), "ids": ids, "via": "Stop hook", **extra}, compactor=LOG
        )


__all__ = ["block_cap", "settled", "stop", "unsettled"]

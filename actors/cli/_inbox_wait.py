"""The body of `actors inbox wait`, without click: an agent re-arms it after every wake,
so it is hand-parsed (actors.cli._fast) and starts as fast as `actors message`."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

from actors.cli._format import ProgressLine, emit_json
from runtime.core import config
from runtime.store.layout import StateRoot, session_paths


def inbox_wait(session: str | None, timeout: float | None, as_json: bool) -> None:
    """`actors inbox wait` (its click command's help says what it does and why)."""
    import select

    from runtime.delivery.boundary import doorbell_unread
    from runtime.delivery.sessions import SessionInbox
    from runtime.messaging.doorbells import doorbell
    from runtime.runner.guardian import Guard

    owner = session_id(session)
    root = StateRoot.from_env()
    if root.hosts.is_dir():  # runs of ours on hosts: their links run while we wait
        from runtime.hosts.link import ensure_links

        ensure_links(root, owner)
    paths = session_paths(root, owner)
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    line = ProgressLine()
    # armed first: a root that cannot take a doorbell (read-only, full) is one line and
    # exit 2 before the guardian starts; the guardian's first folds then ring it
    with doorbell(paths.doorbells) as fd, contextlib.closing(Guard(root, owner)) as guard:
        guard.scan(fail_fast=True)  # its bell armed at its start; the dead runs folded now
        while True:
            # the doorbell rings inside the appender's lock: read after it (no lost wake)
            SessionInbox(paths).read_barrier()
            # follow-ups held for the next prompt / tool call are not a reason to wake
            unread = doorbell_unread(root, owner)
            if unread:
                line.clear()
                _print_wake(owner, unread, as_json)
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                line.clear()
                raise SystemExit(75)
            if line.live:  # redraw the progress line each second; the doorbell still wakes at once
                line.show(f"  waiting for follow-ups to {owner}: {time.monotonic() - started:.0f}s")
                remaining = 1.0 if remaining is None else min(remaining, 1.0)
            poller = select.poll()
            for watched in [fd, *guard.fds()]:
                poller.register(watched, select.POLLIN)
            ms = None if remaining is None else int(remaining * 1000) + 1
            for ready, _ in poller.poll(ms):
                if ready == fd:
                    with contextlib.suppress(BlockingIOError):
                        os.read(fd, 65536)
                else:
                    guard.handle(ready)  # a run of ours died: its follow-up rings fd


def session_id(explicit: str | None) -> str:
    """The session a command acts as: `--session`, else $ACTORS_SESSION, else the user."""
    from runtime.runs.ownership import local_user_session

    return explicit or config.text(config.SESSION) or local_user_session()


def _print_wake(owner: str, unread: list[dict[str, Any]], as_json: bool) -> None:
    """The wake: the one doorbell line, or with --json its facts (nothing is marked read)."""
    from runtime.delivery.boundary import doorbell_line

    if not as_json:
        sys.stdout.write(doorbell_line(owner, unread) + "\n")
        return
    envelopes = [e["envelope"] for e in unread]
    emit_json(
        {
            "session": owner,
            "unread": len(unread),
            "followups": [
                {k: env.get(k) for k in ("id", "type", "from", "summary")} for env in envelopes
            ],
            "read_with": f"actors inbox read --session {owner}",
        }
    )

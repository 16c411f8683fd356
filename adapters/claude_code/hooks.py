"""Claude Code's hooks (`actors hook ...`, JSON on stdin; the CLI wiring is
actors/cli/hooks.py, which parses the input and exits as Claude Code expects).

`session-start` registers the session, exports ACTORS_SESSION and arms the wake file
(`watchPaths`); `file-changed` is the doorbell for idle sessions (asyncRewake: exit 2
with one line); `user-prompt-submit` / `pre-tool-use` hand over follow-ups held in mode
`next-message` / `next-tool-call` as `additionalContext` (runtime.delivery.boundary says
which hook surfaces which follow-up). They run on every Claude Code event, so each
imports only what its own path needs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from runtime.core import config
from runtime.delivery.boundary import (
    Pick,
    doorbell_line,
    doorbell_unread,
    hand_over,
    pick_next_message,
    pick_next_tool_call,
    session_of,
)
from runtime.delivery.sessions import session_paths
from runtime.store.layout import SessionPaths

HARNESS = "claude_code"
CONTEXT = (
    "Background runs started with actors (`actors spawn` or the actors MCP tools) report "
    "back to this session by themselves: when one finishes or needs a decision you will be "
    "woken with a one-line notice. Then read everything pending with `actors inbox read` "
    "(session {session}). Do not poll runs; inspect one only when a follow-up asks for it."
)
WATCHER_CONTEXT = (
    "Background runs started with actors (`actors spawn` or the actors MCP tools) report "
    "back to this session by themselves. Keep one background shell task running "
    "`actors inbox wait --session {session}`: when it exits it prints one line; then read "
    "everything pending with `actors inbox read --session {session}` and start the waiter "
    "again. Do not poll runs; inspect one only when a follow-up asks for it."
)


def session_start(data: dict[str, Any], wake: str) -> dict[str, Any] | None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file; the
    hook's answer, or None when the input names no session (nothing to register)."""
    from runtime.core.ids import is_valid_id, now_iso
    from runtime.delivery.sessions import load_session, save_session
    from runtime.store.layout import StateRoot
    from runtime.store.writes import ensure_dir

    session_id = str(data.get("session_id") or "")
    if not is_valid_id(session_id):
        return None
    root = StateRoot.from_env()
    record = load_session(root, session_id)
    record.update(
        id=session_id,
        harness=HARNESS,
        registered=True,
        last_seen=now_iso(),
        cwd=data.get("cwd"),
        transcript_path=data.get("transcript_path"),
    )
    options = record.setdefault("options", {})
    socket = os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET")  # Claude Code >= 2.1.224
    if socket:
        options["messaging_socket"] = socket
        if os.environ.get("CLAUDE_CODE_MESSAGING_TOKEN"):
            options["messaging_token"] = os.environ["CLAUDE_CODE_MESSAGING_TOKEN"]
    record.setdefault("created_at", now_iso())
    save_session(root, record)
    # the running `actors mcp` of this Claude process acts for this id from now on
    # (a `/clear` starts a new session in the same process)
    from runtime.delivery.harness_processes import record_harness_process

    record_harness_process(root, session_id)
    paths = session_paths(root, session_id)
    ensure_dir(paths.dir)
    _touch_wake(paths.wake)
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file:
        with open(env_file, "a") as handle:
            handle.write(f"export {config.SESSION.name}={session_id}\n")
    context = WATCHER_CONTEXT if wake == "watcher" else CONTEXT
    return {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": context.format(session=session_id),
            **({} if wake == "watcher" else {"watchPaths": [str(paths.wake)]}),
        }
    }


def _touch_wake(path: Path) -> None:
    """Create the wake file the harness watches, never through a planted link, symbolic
    or hard, and never waiting on a FIFO planted there (any of them is left alone: a hook
    never fails a session start)."""
    from runtime.core.errors import ActorsError
    from runtime.store.safe import open_regular

    try:
        os.close(open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    except (OSError, ActorsError):
        pass


def file_changed(data: dict[str, Any]) -> bool:
    """FileChanged (asyncRewake): when follow-ups are unread, write the doorbell line to
    stderr and note the ring; True when it rang (the hook then exits 2 to wake the model)."""
    from runtime.core.ids import is_valid_id
    from runtime.store.layout import StateRoot

    session_id = str(data.get("session_id") or config.text(config.SESSION))
    if not is_valid_id(session_id):
        return False
    unread = doorbell_unread(StateRoot.from_env(), session_id)
    if not unread:
        return False  # coalesced or spurious event, or only boundary-held: nothing to wake for
    sys.stderr.write(doorbell_line(session_id, unread) + "\n")
    sys.stderr.flush()
    _record_wake(session_paths(StateRoot.from_env(), session_id), unread)
    return True


def _record_wake(paths: SessionPaths, unread: list[dict[str, Any]], via: str = "") -> None:
    """Note that the doorbell rang for these entries, or (`via`) that they started a turn
    another way (`actors doctor delivery` judges D4 from it); never fails the hook."""
    from runtime.core.ids import now_iso
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import LOG

    with contextlib.suppress(OSError):
        append_jsonl(
            paths.wakes,
            {"ts": now_iso(), "ids": [e["id"] for e in unread], **({"via": via} if via else {})},
            compactor=LOG,
        )


def _boundary(data: dict[str, Any], event: str, pick: Pick) -> None:
    from runtime.store.layout import StateRoot

    session_id = session_of(data, "session_id", env_first=False)
    if not session_id:
        return
    hand_over(
        StateRoot.from_env(),
        session_id,
        boundary=event,
        harness=HARNESS,
        pick=pick,
        answer=lambda text: {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": text}
        },
    )


SOCKET_PROMPT = re.compile(r"^\[actors\] .*\nfrom .* · delivery (\S+)$", re.M)
"""The head of the text the adapter sends through the messaging socket
(`runtime.delivery.render.injected_text`): the delivery id it carries."""


def user_prompt_submit(data: dict[str, Any]) -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext. A prompt that is a follow-up sent through
    the messaging socket is noted in the wake log: the one trace that it started a turn
    (the socket answers nothing), which `actors doctor delivery` judges from."""
    _note_socket_prompt(data)
    _boundary(data, "UserPromptSubmit", pick_next_message)


def _note_socket_prompt(data: dict[str, Any]) -> None:
    from runtime.delivery.sessions import SessionInbox
    from runtime.store.layout import StateRoot

    found = SOCKET_PROMPT.search(str(data.get("prompt") or ""))
    session_id = session_of(data, "session_id", env_first=False)
    if not found or not session_id:
        return
    paths = session_paths(StateRoot.from_env(), session_id)
    entry = next((e for e in SessionInbox(paths).entries() if e["id"] == found.group(1)), None)
    if entry is not None:  # one of this session's own follow-ups, not a look-alike
        _record_wake(paths, [entry], via="messaging socket")


def pre_tool_use(data: dict[str, Any]) -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    _boundary(data, "PreToolUse", pick_next_tool_call)

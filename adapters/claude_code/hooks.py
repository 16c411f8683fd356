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
import json
import os
import sys
from pathlib import Path
from typing import Any

from runtime.core import config
from runtime.core.errors import ActorsError
from runtime.delivery.boundary import (
    Pick,
    doorbell_line,
    doorbell_unread,
    hand_over,
    note_failure,
    pick_next_message,
    pick_next_tool_call,
    pick_turn_end,
    record_wake,
    session_of,
    take_over,
    touch_wake,
)
from runtime.store.layout import StateRoot, session_paths

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


def session_start(data: dict[str, Any], wake: str) -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file, and
    write the hook's answer (nothing when the input names no session).

    The same Claude process serving another session before (`/clear`, `/resume` in a
    running Claude) makes this one its successor (runtime.delivery.succession): it keeps
    control of that session's runs, and their follow-ups come here. Follow-ups unread so
    far (ones that arrived while the session was not running, or were moved here from
    its predecessor) are handed over with the answer, once."""
    from runtime.core.ids import is_valid_id
    from runtime.store.writes import ensure_dir

    session_id = str(data.get("session_id") or "")
    if not is_valid_id(session_id):
        return
    root = StateRoot.from_env()
    try:
        _register(root, session_id, data)
    except TimeoutError as exc:  # its lock held past the hook wait: the record stays as it was
        note_failure("session-start", f"registering the session: {exc}")
    take_over(root, session_id, "session-start")
    paths = session_paths(root, session_id)
    ensure_dir(paths.dir)
    touch_wake(paths.wake)
    _export_session(session_id)
    context = (WATCHER_CONTEXT if wake == "watcher" else CONTEXT).format(session=session_id)
    # a headless `claude -p` is woken by nothing: its Stop hook waits for its runs instead
    quiet = wake == "watcher" or _headless()
    armed = {} if quiet else {"watchPaths": [str(paths.wake)]}

    def answer(handed: str | None) -> dict[str, Any]:
        text = context if handed is None else f"{context}\n\n{handed}"
        return {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
            | armed
        }

    answered: list[bool] = []

    def with_followups(text: str) -> dict[str, Any]:
        answered.append(True)
        return answer(text)

    with contextlib.suppress(OSError, ActorsError, TimeoutError):
        hand_over(
            root,
            session_id,
            boundary="SessionStart",
            harness=HARNESS,
            pick=pick_turn_end,
            answer=with_followups,
        )
    if not answered:  # nothing to hand over (or it could not be done now): the plain answer
        sys.stdout.write(json.dumps(answer(None)) + "\n")
        sys.stdout.flush()


def _register(root: StateRoot, session_id: str, data: dict[str, Any]) -> None:
    """The session's record, as Claude Code started it (again): one locked update
    (runtime.delivery.sessions.update_session), waiting at most the hook lock wait."""
    from runtime.core.ids import now_iso
    from runtime.delivery.sessions import update_session

    found: dict[str, str] = {}  # what this process knows, found before the lock is taken
    if _headless():  # its Stop hook hands follow-ups over (adapters/claude_code/stop.py)
        found["headless"] = "true"
    socket = os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET")  # Claude Code >= 2.1.224
    if socket and os.path.isabs(socket):  # relative, it would name a socket per sender's cwd
        found["messaging_socket"] = socket
        if os.environ.get("CLAUDE_CODE_MESSAGING_TOKEN"):
            found["messaging_token"] = os.environ["CLAUDE_CODE_MESSAGING_TOKEN"]
    inbound = _inbound(data)

    def change(record: dict[str, Any]) -> dict[str, Any]:
        record.update(
            id=session_id,
            harness=HARNESS,
            registered=True,
            last_seen=now_iso(),
            cwd=data.get("cwd"),
            transcript_path=data.get("transcript_path"),
        )
        record.pop("successor", None)  # running again: its own follow-ups come to it
        options = record.setdefault("options", {})
        # This Claude process's socket, or none: a path recorded by an earlier process may
        # be another session's by now (Claude would drop our frame there, unseen).
        for key in ("messaging_socket", "messaging_token", "permission_mode", "headless"):
            options.pop(key, None)  # the mode is recorded again at the first prompt
        options.update(found)
        _set_inbound(options, inbound)
        record.setdefault("created_at", now_iso())
        return record

    update_session(root, session_id, change, wait_s=config.seconds(config.HOOK_LOCK_WAIT))


def _headless() -> bool:
    from adapters.claude_code.headless import headless

    return headless()


def _inbound(data: dict[str, Any]) -> str | None:
    """The session's effective `crossSessionInbound` (adapters/claude_code/gate.py)."""
    from adapters.claude_code.gate import config_dir, inbound_setting

    cwd = data.get("cwd")
    return inbound_setting(config_dir(), Path(cwd) if isinstance(cwd, str) else None)


def _set_inbound(options: dict[str, Any], inbound: str | None) -> None:
    if inbound is None:
        options.pop("inbound", None)
    else:
        options["inbound"] = inbound


def note_permission_mode(data: dict[str, Any]) -> None:
    """Record the session's permission mode (UserPromptSubmit and PreToolUse input carry
    it; SessionStart's does not) and its inbound setting again, when either changed: the
    adapter sends through the messaging socket only where Claude would deliver it
    (adapters/claude_code/gate.py). Decided from the record as read first (the common
    case: nothing changed, no lock), then written in one locked update that decides
    again. Never fails the hook."""
    from runtime.core.ids import is_valid_id
    from runtime.delivery.sessions import load_session, update_session

    mode = data.get("permission_mode")
    session_id = str(data.get("session_id") or "")
    if not isinstance(mode, str) or not is_valid_id(session_id):
        return
    root = StateRoot.from_env()
    try:
        inbound = _inbound(data)

        def change(record: dict[str, Any]) -> dict[str, Any] | None:
            if not record.get("registered") or record.get("harness") != HARNESS:
                return None
            options = record.setdefault("options", {})
            before = (options.get("permission_mode"), options.get("inbound"))
            options["permission_mode"] = mode[:64]
            _set_inbound(options, inbound)
            changed = (options.get("permission_mode"), options.get("inbound")) != before
            return record if changed else None

        if change(load_session(root, session_id)) is not None:
            wait = config.seconds(config.HOOK_LOCK_WAIT)
            update_session(root, session_id, change, wait_s=wait)
    except Exception as exc:  # the prompt goes on; the doorbell is the fallback
        note_failure("permission-mode", f"recording the permission mode: {exc}")


def _export_session(session_id: str) -> None:
    """Append `export ACTORS_SESSION=...` to $CLAUDE_ENV_FILE (Claude Code sources it for
    its Bash tool). Opened non-blocking, so a FIFO with no reader cannot hang the hook; a
    file that cannot be written (a missing directory, no permission) is noted, and the
    session start goes on: the MCP server and the hooks know the session without it."""
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if not env_file:
        return
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(env_file, flags, 0o600)
        try:
            os.write(fd, f"export {config.SESSION.name}={session_id}\n".encode())
        finally:
            os.close(fd)
    except OSError as exc:
        note_failure("session-start", f"CLAUDE_ENV_FILE {env_file}: {exc.strerror or exc}")


def file_changed(data: dict[str, Any]) -> bool:
    """FileChanged (asyncRewake): when follow-ups are unread, write the doorbell line to
    stderr and note the ring; True when it rang (the hook then exits 2 to wake the model)."""
    from runtime.core.ids import is_valid_id
    from runtime.store.layout import StateRoot

    session_id = str(data.get("session_id") or config.text(config.SESSION))
    if not is_valid_id(session_id):
        return False
    root = StateRoot.from_env()
    unread = doorbell_unread(root, session_id)
    if not unread:
        return False  # coalesced or spurious event, or only boundary-held: nothing to wake for
    paths = session_paths(root, session_id)
    sys.stderr.write(doorbell_line(session_id, unread) + "\n")
    sys.stderr.flush()  # raises when it cannot be written: then no wake (exit 0)
    record_wake(paths, unread)
    return True


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


def user_prompt_submit(data: dict[str, Any]) -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext. A prompt that is a follow-up sent through
    the messaging socket is noted in the wake log: the one trace that it started a turn
    (the socket answers nothing), which `actors doctor delivery` judges from."""
    note_permission_mode(data)
    _note_socket_prompt(data)
    _boundary(data, "UserPromptSubmit", pick_next_message)


def _note_socket_prompt(data: dict[str, Any]) -> None:
    from runtime.delivery.render import delivery_ids
    from runtime.delivery.sessions import SessionInbox
    from runtime.store.layout import StateRoot

    # the header line runtime.delivery.render.injected_text starts each follow-up with;
    # run-written text never starts a line there, so only our own headers count
    found = delivery_ids(str(data.get("prompt") or "")[:1_000_000])
    session_id = session_of(data, "session_id", env_first=False)
    if not found or not session_id:
        return
    paths = session_paths(StateRoot.from_env(), session_id)
    entry = next((e for e in SessionInbox(paths).entries() if e["id"] == found[0]), None)
    if entry is not None:  # one of this session's own follow-ups, not a look-alike
        record_wake(paths, [entry], via="messaging socket")


def pre_tool_use(data: dict[str, Any]) -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    note_permission_mode(data)
    _boundary(data, "PreToolUse", pick_next_tool_call)


def record_spawner_socket(root: StateRoot, owner: str) -> None:
    """`actors spawn` run by a Claude Code session (its Bash tool, its MCP server): the
    messaging socket in that environment is the session's own, when Claude says the
    session is `owner` ($CLAUDE_CODE_SESSION_ID). Recorded where SessionStart did not
    (hooks installed after the session started, a session registered by hand); a run's
    processes are never `owner`'s Claude (they act as `run:<id>`). Never fails a spawn."""
    socket = os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET")
    if not socket or not os.path.isabs(socket):
        return  # relative, it would name a different socket in each sender's directory
    if os.environ.get("CLAUDE_CODE_SESSION_ID") != owner:
        return
    from runtime.delivery.sessions import load_session, update_session

    token = os.environ.get("CLAUDE_CODE_MESSAGING_TOKEN")

    def change(record: dict[str, Any]) -> dict[str, Any] | None:
        options = record.get("options") or {}
        if record.get("harness") != HARNESS or not record.get("registered"):
            return None
        if options.get("messaging_socket") == socket:
            return None
        options["messaging_socket"] = socket
        options.pop("messaging_token", None)
        if token:
            options["messaging_token"] = token
        record["options"] = options
        return record

    with contextlib.suppress(OSError, ActorsError, ValueError):
        if change(load_session(root, owner)) is not None:  # decided again under the lock
            update_session(root, owner, change, wait_s=config.seconds(config.HOOK_LOCK_WAIT))

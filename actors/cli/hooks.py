"""`actors hook ...`: commands Claude Code runs as hooks (JSON on stdin)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import click

CONTEXT = (
    "Background runs started with actors (`actors spawn` or the actors MCP tools) report "
    "back to this session by themselves: when one finishes or needs a decision you will be "
    "woken with a one-line notice. Then read everything pending with `actors inbox read` "
    "(session {session}). Do not poll runs; inspect one only when a follow-up asks for it."
)


def _hook_input() -> dict[str, Any]:
    try:
        data = json.load(sys.stdin)
    except (ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


@click.group("hook")
def hook_group() -> None:
    """Harness hook commands (run by Claude Code, not by hand)."""


@hook_group.command("session-start")
def session_start() -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file."""
    from runtime.files import ensure_dir
    from runtime.ids import is_valid_id, now_iso
    from runtime.paths import StateRoot
    from runtime.sessions import load_session, save_session, session_paths

    data = _hook_input()
    session_id = str(data.get("session_id") or "")
    if not is_valid_id(session_id):
        sys.exit(0)  # never block a session start; there is nothing to register
    root = StateRoot.from_env()
    record = load_session(root, session_id)
    record.update(
        id=session_id,
        harness="claude_code",
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
    paths = session_paths(root, session_id)
    ensure_dir(paths.dir)
    if not paths.wake.exists():
        paths.wake.touch(mode=0o600)
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file:
        with open(env_file, "a") as handle:
            handle.write(f"export ACTORS_SESSION={session_id}\n")
    click.echo(
        json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": CONTEXT.format(session=session_id),
                    "watchPaths": [str(paths.wake)],
                }
            }
        )
    )


@hook_group.command("file-changed")
def file_changed() -> None:
    """FileChanged (asyncRewake): exit 2 with a doorbell line when follow-ups are unread."""
    from runtime.ids import is_valid_id
    from runtime.paths import StateRoot
    from runtime.sessions import SessionInbox, session_paths

    data = _hook_input()
    session_id = str(data.get("session_id") or os.environ.get("ACTORS_SESSION") or "")
    if not is_valid_id(session_id):
        sys.exit(0)
    unread = SessionInbox(session_paths(StateRoot.from_env(), session_id)).unread()
    if not unread:
        sys.exit(0)  # coalesced or spurious event: nothing to wake for
    first = unread[0]["envelope"].get("summary") or unread[0]["envelope"].get("type")
    click.echo(
        f"ACTORS: {len(unread)} unread follow-up(s); first: {first}. "
        f"Read them all with: actors inbox read --session {session_id}",
        err=True,
    )
    _record_wake(session_paths(StateRoot.from_env(), session_id), unread)
    sys.exit(2)


def _record_wake(paths: Any, unread: list[dict[str, Any]]) -> None:
    """Note that the doorbell rang for these entries (`actors doctor delivery` judges D4
    from it); never fails the hook."""
    from runtime.files import append_jsonl
    from runtime.ids import now_iso

    with contextlib.suppress(OSError):
        append_jsonl(paths.dir / "wakes.jsonl", {"ts": now_iso(), "ids": [e["id"] for e in unread]})

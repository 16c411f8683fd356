"""`actors hook ...`: commands harnesses run as hooks (JSON on stdin), wired to the hook
logic of each harness's adapter package.

Claude Code (adapters/claude_code/hooks.py): `session-start`, `file-changed` and the
boundary hooks `user-prompt-submit` / `pre-tool-use`. Harnesses with no idle wake get
turn-boundary hooks: `gemini-after-agent` (adapters/gemini.py) and `cursor-stop`
(adapters/cursor.py). What each hook surfaces, and under which locks, is
runtime/delivery/boundary.py. Hooks run on every harness event, so nothing here imports
more than the command being run needs; and any error makes a boundary hook exit 0 with
no output: a hook never blocks a prompt, a tool or a stop.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from adapters.cursor import CURSOR_LOOP_LIMIT
from adapters.gemini import GEMINI_MAX_CHAIN


def _hook_input() -> dict[str, Any]:
    """The harness's JSON payload; {} when it is not usable (a hook never fails on its
    input). Bounded (runtime.core.bounded_json): at most MAX_INPUT_BYTES are read, and
    deep nesting, NaN or undecodable text count as unusable, never as a crash."""
    from runtime.core.bounded_json import INPUT_DEPTH, MAX_INPUT_BYTES, Undecodable, decode

    try:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # Cursor may send a BOM
        data = decode(raw, max_bytes=MAX_INPUT_BYTES, max_depth=INPUT_DEPTH)
    except (Undecodable, OSError, AttributeError):
        return {}
    return data if isinstance(data, dict) else {}


def _quietly(body: Callable[[dict[str, Any]], None]) -> None:
    """Run a boundary hook on its input: whatever goes wrong, exit 0 without blocking
    the harness."""
    try:
        body(_hook_input())
    except SystemExit:
        raise
    except BaseException:  # a hook must never block a prompt, a tool or a stop
        sys.exit(0)
    sys.exit(0)


@click.group("hook")
def hook_group() -> None:
    """Harness hook commands (run by Claude Code, not by hand)."""


@hook_group.command("session-start")
@click.option(
    "--wake",
    type=click.Choice(["hook", "watcher"]),
    default="hook",
    help="watcher: no watchPaths; tell the agent to keep `actors inbox wait` running.",
)
def session_start(wake: str) -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file."""
    from adapters.claude_code import hooks

    answer = hooks.session_start(_hook_input(), wake)
    if answer is None:
        sys.exit(0)  # never block a session start; there is nothing to register
    click.echo(json.dumps(answer))


@hook_group.command("file-changed")
def file_changed() -> None:
    """FileChanged (asyncRewake): exit 2 with a doorbell line when follow-ups are unread."""
    from adapters.claude_code import hooks

    sys.exit(2 if hooks.file_changed(_hook_input()) else 0)


@hook_group.command("user-prompt-submit")
def user_prompt_submit() -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext."""
    from adapters.claude_code import hooks

    _quietly(hooks.user_prompt_submit)


@hook_group.command("pre-tool-use")
def pre_tool_use() -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    from adapters.claude_code import hooks

    _quietly(hooks.pre_tool_use)


@hook_group.command("gemini-after-agent")
@click.option(
    "--max-chain",
    type=int,
    default=GEMINI_MAX_CHAIN,
    show_default=True,
    help="Consecutive continuations before the agent may stop anyway.",
)
def gemini_after_agent(max_chain: int) -> None:
    """Gemini CLI AfterAgent: unread follow-ups become the next prompt
    (`{"decision": "deny", "reason": ...}`); silent when nothing is pending."""
    from adapters.gemini import after_agent

    _quietly(lambda data: after_agent(data, max_chain))


@hook_group.command("cursor-stop")
@click.option(
    "--loop-limit",
    type=int,
    default=CURSOR_LOOP_LIMIT,
    show_default=True,
    help="The `loop_limit` of this hook's hooks.json entry (Cursor's default is 5).",
)
def cursor_stop(loop_limit: int) -> None:
    """Cursor stop: unread follow-ups become the next user message
    (`{"followup_message": ...}`), never past the loop limit; silent otherwise."""
    from adapters.cursor import stop

    _quietly(lambda data: stop(data, loop_limit))

"""`actors hook ...` as click commands: help, options and usage errors. Plain calls of
Claude Code's hooks skip click (actors.cli.hooks.PLAIN); both call the same functions,
and every hook runs inside actors.cli.hooks.run_hook, which never fails its harness."""

from __future__ import annotations

import click

from actors.cli.hooks import (
    file_changed,
    hook_input,
    pi_serve,
    pi_session_start,
    pi_wake,
    pre_tool_use,
    session_start,
    stop,
    user_prompt_submit,
)
from adapters.copilot import COPILOT_MAX_CHAIN
from adapters.cursor import CURSOR_LOOP_LIMIT
from adapters.gemini import GEMINI_MAX_CHAIN
from adapters.qwen import QWEN_MAX_CHAIN


@click.group("hook")
def hook_group() -> None:
    """Harness hook commands (run by Claude Code, Gemini CLI, Cursor and the actors pi
    extension, not by hand)."""


@hook_group.command("session-start")
@click.option(
    "--wake",
    type=click.Choice(["hook", "watcher"]),
    default="hook",
    help="watcher: no watchPaths; tell the agent to keep `actors inbox wait` running.",
)
def session_start_cmd(wake: str) -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file, hand
    over follow-ups unread so far."""
    session_start(wake)


@hook_group.command("file-changed")
def file_changed_cmd() -> None:
    """FileChanged (asyncRewake): exit 2 with a doorbell line when follow-ups are unread."""
    file_changed()


@hook_group.command("user-prompt-submit")
def user_prompt_submit_cmd() -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext."""
    user_prompt_submit()


@hook_group.command("pre-tool-use")
def pre_tool_use_cmd() -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    pre_tool_use()


@hook_group.command("stop")
def stop_cmd() -> None:
    """Stop: a headless `claude -p` waits for its live runs and goes on with their
    follow-ups; any other session ends its turn at once."""
    stop()


@hook_group.command("pi-session-start")
def pi_session_start_cmd() -> None:
    """The actors pi extension's session start: register the pi session, answer with its
    actors session id and the wake file to watch."""
    pi_session_start()


@hook_group.command("pi-wake")
def pi_wake_cmd() -> None:
    """The actors pi extension's wake: the unread follow-ups as one fenced text for pi
    (marked read once handed over); silent when nothing is pending."""
    pi_wake()


@hook_group.command("pi-serve")
def pi_serve_cmd() -> None:
    """pi-wake kept running for one pi process: one JSON request per stdin line, one
    answer line per request (with its `seq`), until stdin ends."""
    pi_serve()


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

    after_agent(hook_input(), max_chain)


@hook_group.command("qwen-stop")
@click.option(
    "--max-chain",
    type=int,
    default=QWEN_MAX_CHAIN,
    show_default=True,
    help="Consecutive continuations before the agent may stop anyway.",
)
def qwen_stop(max_chain: int) -> None:
    """Qwen Code Stop: unread follow-ups become the next prompt
    (`{"decision": "block", "reason": ...}`); silent when nothing is pending."""
    from adapters.qwen import stop

    stop(hook_input(), max_chain)


@hook_group.command("copilot-agent-stop")
@click.option(
    "--max-chain",
    type=int,
    default=COPILOT_MAX_CHAIN,
    show_default=True,
    help="Consecutive continuations before the agent may stop anyway.",
)
def copilot_agent_stop(max_chain: int) -> None:
    """Copilot CLI agentStop: unread follow-ups become the next prompt
    (`{"decision": "block", "reason": ...}`); silent when nothing is pending."""
    from adapters.copilot import agent_stop

    agent_stop(hook_input(), max_chain)


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

    stop(hook_input(), loop_limit)

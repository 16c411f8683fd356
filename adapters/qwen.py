"""Qwen Code (a fork of Gemini CLI): its Stop hook carries follow-ups at a turn's end.

Qwen Code replaced Gemini's AfterAgent with Claude-style hook events (`Stop`,
`UserPromptSubmit`, `SessionStart`, ... in `hooks` of ~/.qwen/settings.json). Its Stop
hook gets `session_id` and `stop_hook_active` like Gemini's AfterAgent, and an answer
`{"decision": "block", "reason": ...}` makes the reason the next prompt of the same
turn (Qwen caps consecutive blocks itself too). So `actors hook qwen-stop` is Gemini's
hook with Qwen's event name and decision word (adapters.gemini.continue_turn); there is
no idle wake through it (docs/harnesses.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.install_edits import Change, Edit

HARNESS = "qwen_code"
QWEN_MAX_CHAIN = 3
"""Consecutive Stop continuations before the hook lets the agent stop."""


def stop(data: dict[str, Any], max_chain: int) -> None:
    """Stop: every unread follow-up (but unflushed `manual` ones) as the reason of a
    block, unless `max_chain` continuations in a row already happened."""
    from adapters.gemini import continue_turn

    continue_turn(data, max_chain, harness=HARNESS, boundary="Stop", decision="block")


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """`actors install qwen-code`: our MCP server (`mcpServers.actors`, started as
    `command mcp`) and our Stop hook group in `~/.qwen/settings.json` (or the project's
    `.qwen/settings.json`), for `command` (how Qwen starts us); `wake` is Claude Code's.
    Other servers and other hooks of the Stop event stay, before ours. The server is not
    trusted: Qwen asks before each call unless the user chose otherwise (`--yolo`)."""
    import shlex
    from pathlib import Path

    from adapters.install_edits import both, json_edit, mcp_entry

    base = Path.cwd() if scope == "project" else Path.home()
    ours = {"hooks": [{"type": "command", "command": f"{shlex.join(command)} hook qwen-stop"}]}
    server = {"command": command[0], "args": [*command[1:], "mcp"]}
    return [
        json_edit(
            base / ".qwen" / "settings.json",
            *both(mcp_entry("mcpServers", server), hook_group("Stop", ours, "hook qwen-stop")),
            what="MCP server actors; hooks Stop (actors hook qwen-stop)",
        )
    ]


def hook_group(event: str, ours: dict[str, Any], suffix: str) -> Change:
    """Our group in a Claude-style `hooks.<event>` list (Qwen Code's settings): a group
    whose every command ends with `suffix` is ours, replaced by `ours` at install and
    taken out at uninstall (the list and `hooks` go when they empty)."""

    def is_ours(group: Any) -> bool:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        return (
            isinstance(hooks, list)
            and bool(hooks)
            and all(
                isinstance(h, dict) and str(h.get("command", "")).endswith(suffix) for h in hooks
            )
        )

    def put(data: dict[str, Any]) -> None:
        groups = data.setdefault("hooks", {}).setdefault(event, [])
        if ours not in groups:
            groups[:] = [g for g in groups if not is_ours(g)] + [ours]

    def take(data: dict[str, Any], added: Any = None) -> None:
        hooks = data.get("hooks")
        if not isinstance(hooks, dict) or not isinstance(hooks.get(event), list):
            return
        kept = [g for g in hooks[event] if not is_ours(g)]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
        if not hooks:
            del data["hooks"]

    return put, take


def next_steps(scope: str) -> list[str]:
    """What `actors install qwen-code` cannot do: the idle wake needs Qwen started with
    an input file, and a session registered for it."""
    return [
        "to wake an idle interactive Qwen Code: start it as `qwen --input-file F --json-file E`"
        " (absolute paths) and run `actors session register --harness qwen_code"
        " -o input_file=F -o events_file=E`"
    ]

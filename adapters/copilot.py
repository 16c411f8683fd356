"""GitHub Copilot CLI: its agentStop hook carries follow-ups at a turn's end.

Copilot CLI loads command hooks from `~/.copilot/hooks/*.json` (and a trusted
repository's `.github/hooks/*.json`). Its `agentStop` hook gets `sessionId` and
`stop_hook_active`, and an answer `{"decision": "block", "reason": ...}` makes the reason
the next prompt of the same turn (observed on 1.0.102, `tests/peers/test_copilot.py`).
So `actors hook copilot-agent-stop` is Gemini's turn-end hook with Copilot's event,
session field and decision word (adapters.gemini.continue_turn); there is no idle wake
through it (docs/harnesses.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapters.install_edits import Edit

HARNESS = "copilot_cli"
COPILOT_MAX_CHAIN = 3
"""Consecutive agentStop continuations before the hook lets the agent stop (Copilot's
own runaway guard is higher)."""


def agent_stop(data: dict[str, Any], max_chain: int) -> None:
    """agentStop: every unread follow-up (but unflushed `manual` ones) as the reason of
    a block, unless `max_chain` continuations in a row already happened."""
    from adapters.gemini import continue_turn

    continue_turn(
        data,
        max_chain,
        harness=HARNESS,
        boundary="agentStop",
        decision="block",
        session_key="sessionId",
    )


HOOKS_FILE = "actors.json"
"""Our file in Copilot's hooks directory: written whole, taken out whole."""


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """`actors install copilot`: our MCP server (`mcpServers.actors`, started as `command
    mcp`, all its tools) in `~/.copilot/mcp-config.json` and our agentStop hook in
    `~/.copilot/hooks/actors.json` ($COPILOT_HOME moves `~/.copilot`), or the project's
    `.github/mcp.json` and `.github/hooks/actors.json`, for `command` (how Copilot starts
    us); `wake` is Claude Code's. Other MCP servers stay; a hooks file of that name that
    is not ours is refused, nothing written."""
    import json
    import os
    import shlex
    from pathlib import Path

    from adapters.install_edits import Edit, json_edit, mcp_entry
    from runtime.core.errors import BadInput

    if scope == "project":
        config = Path.cwd() / ".github"
        mcp_file = config / "mcp.json"
    else:
        config = Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot")
        mcp_file = config / "mcp-config.json"
    path = config / "hooks" / HOOKS_FILE
    server = {"type": "local", "command": command[0], "args": [*command[1:], "mcp"], "tools": ["*"]}
    hook = {"type": "command", "bash": f"{shlex.join(command)} hook copilot-agent-stop"}
    ours = json.dumps({"version": 1, "hooks": {"agentStop": [hook]}}, indent=2) + "\n"

    def is_ours(text: str) -> bool:
        try:
            hooks = json.loads(text)["hooks"]
            return list(hooks) == ["agentStop"] and all(
                str(h["bash"]).endswith(" hook copilot-agent-stop") for h in hooks["agentStop"]
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return False

    def add(text: str | None) -> str:
        if text and text != ours and not is_ours(text):
            raise BadInput(f"{path} exists and is not ours; remove it first, nothing was changed")
        return ours

    def remove(text: str, added: object = None) -> str:
        return "" if is_ours(text) else text

    return [
        json_edit(mcp_file, *mcp_entry("mcpServers", server), what="MCP server actors"),
        Edit(path, add, remove, what="hook agentStop (actors hook copilot-agent-stop)"),
    ]

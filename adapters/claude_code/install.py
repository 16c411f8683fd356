"""`actors install claude-code`: the MCP server (`.mcp.json` in the project,
`~/.claude.json` for the user) and our hooks (`.claude/settings.json` /
`~/.claude/settings.json`; `$CLAUDE_CONFIG_DIR` moves the user files): SessionStart,
FileChanged (asyncRewake; not with `--wake watcher`) and the boundary hooks
UserPromptSubmit / PreToolUse that hand over `next-message` / `next-tool-call`
follow-ups (adapters/claude_code/hooks.py runs them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from adapters.install_edits import Change, Edit, json_edit, mcp_entry

_OUR_HOOKS = (
    "hook session-start",
    "hook file-changed",
    "hook user-prompt-submit",
    "hook pre-tool-use",
)


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """The MCP entry and the hooks, for `command` (how Claude Code starts us)."""
    home = Path.home()
    config_dir = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    if scope == "project":
        mcp_file, settings = Path.cwd() / ".mcp.json", Path.cwd() / ".claude" / "settings.json"
    else:
        mcp_file = (
            (config_dir / ".claude.json")
            if os.environ.get("CLAUDE_CONFIG_DIR")
            else home / ".claude.json"
        )
        settings = config_dir / "settings.json"
    entry: dict[str, Any] = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp"]}
    return [
        json_edit(mcp_file, *mcp_entry("mcpServers", entry)),
        json_edit(settings, *_hooks(" ".join(command), wake)),
    ]


def _is_ours(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    if not isinstance(hooks, list) or not hooks:
        return False
    return all(
        isinstance(h, dict) and str(h.get("command", "")).endswith(_OUR_HOOKS) for h in hooks
    )


def _groups(cmd: str, wake: str) -> dict[str, Any]:
    """Our hook group per Claude Code event."""
    start = f"{cmd} hook session-start" + (" --wake watcher" if wake == "watcher" else "")
    ours: dict[str, Any] = {
        "SessionStart": {"hooks": [{"type": "command", "command": start}]},
        "FileChanged": {
            "hooks": [
                {
                    "type": "command",
                    "command": f"{cmd} hook file-changed",
                    "asyncRewake": True,
                    # without these the model reads a follow-up as "Stop hook blocking
                    # error" (fields marked internal in Claude Code 2.1; honoured there,
                    # ignored where unknown)
                    "rewakeSummary": "actors: follow-ups to read",
                    "rewakeMessage": "actors follow-ups arrived:",
                }
            ]
        },
        # boundary modes: silent unless a follow-up waits for this boundary; the timeout
        # (s) bounds what a stuck hook could cost a prompt or a tool call
        "UserPromptSubmit": {
            "hooks": [
                {"type": "command", "command": f"{cmd} hook user-prompt-submit", "timeout": 10}
            ]
        },
        "PreToolUse": {
            "hooks": [{"type": "command", "command": f"{cmd} hook pre-tool-use", "timeout": 10}]
        },
    }
    if wake == "watcher":  # the agent runs `actors inbox wait` in the background instead
        del ours["FileChanged"]
    return ours


def _hooks(cmd: str, wake: str = "hook") -> tuple[Change, Change]:
    ours = _groups(cmd, wake)

    def put(data: dict[str, Any]) -> None:
        hooks = data.setdefault("hooks", {})
        for event, group in ours.items():
            groups = hooks.setdefault(event, [])
            if group not in groups:
                groups[:] = [g for g in groups if not _is_ours(g)] + [group]

    def take(data: dict[str, Any]) -> None:
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event in ours:
            groups = hooks.get(event)
            if isinstance(groups, list):
                kept = [g for g in groups if not _is_ours(g)]
                if kept:
                    hooks[event] = kept
                else:
                    hooks.pop(event, None)
        if not hooks:
            data.pop("hooks", None)

    return put, take

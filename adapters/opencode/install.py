"""`actors install opencode`: `mcp.actors` in the project's `opencode.json`, or the
user's `$XDG_CONFIG_HOME/opencode/opencode.json` (default `~/.config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.install_edits import Edit, json_edit, mcp_entry
from runtime.core import config


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """Our local MCP server entry, for `command` (how OpenCode starts us); `wake` is
    Claude Code's."""
    xdg = Path(config.path(config.XDG_CONFIG_HOME))
    target = (
        Path.cwd() / "opencode.json" if scope == "project" else xdg / "opencode" / "opencode.json"
    )
    local: dict[str, Any] = {"type": "local", "command": [*command, "mcp"], "enabled": True}
    return [json_edit(target, *mcp_entry("mcp", local), what="MCP server actors (mcp.actors)")]

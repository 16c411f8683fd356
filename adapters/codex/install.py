"""`actors install codex`: `[mcp_servers.actors]` in `$CODEX_HOME/config.toml` (user
scope only: Codex reads its MCP servers from the user config).

Codex starts MCP servers with a whitelisted environment; `env_vars` names the variables
it passes through, so `actors mcp` sees the same state root (ACTORS_HOME, the XDG
directories) and settings as the shell that started Codex. Which thread calls is not an
environment matter: Codex sends it with every tool call (actors.mcp_session)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from adapters.install_edits import Edit, toml_edit
from runtime.core import config
from runtime.core.errors import BadInput


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """Our MCP server block, for `command` (how Codex starts us); `wake` is Claude Code's."""
    if scope == "project":
        raise BadInput("codex reads its MCP servers from the user config only", hint="use --user")
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    args = json.dumps([*command[1:], "mcp"])
    passed = json.dumps([s.name for s in config.SETTINGS if s.scope == config.USER])
    block = (
        f"[mcp_servers.actors]\ncommand = {json.dumps(command[0])}\nargs = {args}\n"
        f"env_vars = {passed}\n"
    )
    return [toml_edit(codex_home / "config.toml", block, what="[mcp_servers.actors]")]

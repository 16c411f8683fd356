"""`actors mcp`: run the MCP server on stdio (the heavy imports happen only here)."""

from __future__ import annotations

import os

import click

from runtime.core import config


@click.command("mcp")
@click.option(
    "--session",
    metavar="ID",
    help="Session for every call (default: each call's own harness session, else"
    " $ACTORS_SESSION, else $CLAUDE_CODE_SESSION_ID, else your user).",
)
def mcp_cmd(session: str | None) -> None:
    """Serve spawn / message / inspect / inbox_read / recipes as MCP tools over stdio."""
    from actors.mcp_server import serve
    from runtime.runs.ownership import local_user_session
    from runtime.store.layout import StateRoot

    # Claude Code gives the MCP servers it starts CLAUDE_CODE_SESSION_ID (seen with the real
    # 2.1.197), the same id its SessionStart hook registers: runs spawned through the tools
    # then wake that very session.
    # Each call is then resolved to its caller's live session (actors.mcp_session); this
    # is the fallback, and an explicit --session is used as given.
    serve(
        StateRoot.from_env(),
        session
        or config.text(config.SESSION)
        or os.environ.get("CLAUDE_CODE_SESSION_ID")
        or local_user_session(),
        explicit=session is not None,
    )

"""`actors mcp`: run the MCP server on stdio (the heavy imports happen only here)."""

from __future__ import annotations

import click

from runtime.core import config


@click.command("mcp")
@click.option(
    "--session",
    metavar="ID",
    help="Session for every call (default: each call's own harness session, else"
    " $ACTORS_SESSION, else the session id the harness gave us ($CLAUDE_CODE_SESSION_ID,"
    " $QWEN_CODE_SESSION_ID, $COPILOT_AGENT_SESSION_ID), else your user).",
)
def mcp_cmd(session: str | None) -> None:
    """Serve spawn / message / inspect / inbox_read / recipes as MCP tools over stdio."""
    from actors.mcp_server import serve
    from actors.mcp_session import harness_session
    from runtime.runs.ownership import local_user_session
    from runtime.store.layout import StateRoot

    # Each call is resolved to its caller's live session (actors.mcp_session); this is
    # the fallback, and an explicit --session is used as given.
    serve(
        StateRoot.from_env(),
        session or config.text(config.SESSION) or harness_session() or local_user_session(),
        explicit=session is not None,
    )

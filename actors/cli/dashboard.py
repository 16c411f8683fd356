"""`actors dashboard`: the local web page (the server is imported only here)."""

from __future__ import annotations

import click

from actors.cli._options import session_option


@click.command("dashboard")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port (0: a free one).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a --host that is not loopback (the page can kill runs; HTTP is clear text).",
)
@session_option
def dashboard_cmd(host: str, port: int, allow_remote: bool, session: str | None) -> None:
    """Serve a live web view of runs, rooms and sessions; prints its URL (with a token)."""
    from actors.dashboard.server import serve

    serve(host, port, allow_remote=allow_remote, session=session)

"""Click options several command modules share, spelled once."""

from __future__ import annotations

import click

session_option = click.option(
    "--session",
    metavar="ID",
    help="Act as this session (default: $ACTORS_SESSION, else your user).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")
force_option = click.option("--force", is_flag=True, help="Act even on another session's run.")

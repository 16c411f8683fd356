"""The click group: every command, and the hand-parsed ones (actors.cli._fast) when their
arguments need more than the small parser takes."""

from __future__ import annotations

import sys
from typing import Any

import click

from actors._version import __version__
from actors.cli._lazy import LazyGroup
from actors.cli.commands import TABLE


@click.group(cls=LazyGroup, table=TABLE, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="actors")
def cli() -> None:
    """Start long or background work as detached run actors, message them, and get
    their results back in the session that started them.

    State lives in $ACTORS_HOME (default ~/.local/state/actors).
    """


def run_click(args: list[str]) -> Any:
    """Run the group on `args`, turning click's own outcomes into exit statuses."""
    try:
        return cli.main(args=args, prog_name="actors", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except click.Abort:
        click.echo("actors: aborted", err=True)
        sys.exit(130)

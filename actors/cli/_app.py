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
    except click.exceptions.NoArgsIsHelpError as exc:  # `actors host`: its help, as asked
        exc.show()
        sys.exit(2)
    except click.UsageError as exc:
        click.echo(usage_line(exc, args), err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("actors: aborted", err=True)
        sys.exit(130)


def usage_line(error: click.UsageError, args: list[str]) -> str:
    """A usage error as the one line every input error is (what is wrong, then where the
    help is), not click's usage block: an agent reads one line, and a person sees what
    to fix without the block around it."""
    where = error.ctx.command_path if error.ctx is not None else _command_path(args)
    what = " ".join(error.format_message().split()).rstrip(".")
    return f"actors: {what[:1].lower()}{what[1:]}; see `{where} --help`"


def _command_path(args: list[str]) -> str:
    """The command `args` name (`actors inbox wait`), for an error click raised before
    that command's context existed."""
    command: click.Command = cli
    path = ["actors"]
    for arg in args:
        if not isinstance(command, click.Group):
            break
        found = command.get_command(click.Context(command), arg)
        if found is None:
            break
        command, path = found, [*path, arg]
    return " ".join(path)

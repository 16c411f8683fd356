"""A click group that imports each subcommand's module only when it is invoked."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import click

from actors.cli.commands import Command


class LazyGroup(click.Group):
    """The commands of a table (actors.cli.commands): a command's module is imported when
    the command runs, and `--help` lists them from the table, importing none."""

    def __init__(self, *args: Any, table: Iterable[Command] = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.table = {command.name: command for command in table}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.table))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.table.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        module_name, attr = entry.target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry.target} is not a click command")
        command.short_help = entry.summary  # one summary: the table's
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing every command's short help would import every module; keep --help cheap.
        rows = [
            (name, self.table[name].summary if name in self.table else "")
            for name in self.list_commands(ctx)
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

"""A click group that imports each subcommand's module only when it is invoked."""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyGroup(click.Group):
    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            module_name, attr = self.lazy_commands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing every command's short help would import every module; keep --help cheap.
        rows = [(name, _SUMMARIES.get(name, "")) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_SUMMARIES = {
    "spawn": "Start a detached run from a recipe or an inline template.",
    "ls": "List runs (compact table; --json for machines).",
    "status": "Show one run's status; --line: this session's active work.",
    "tail": "Print the end of a run's output; -f follows it.",
    "result": "Print a finished run's result.",
    "wait": "Block until a run finishes; exit with its code.",
    "cancel": "Stop a run gracefully (SIGTERM, grace period, SIGKILL).",
    "kill": "Kill a run and every process it started, at once.",
    "archive": "Move a finished run out of runs/ into archive/.",
    "prune": "Delete finished runs' state.",
    "message": "Send a typed message to a run, branch, room or tool.",
    "recv": "Inside a run: wait for the next message and print it.",
    "emit": "Inside a run: send an actor message to the coordinator or room.",
    "inspect": "Read a run, branch, room or session on purpose (views; --json).",
    "session": "Register and manage coordinator sessions (follow-up targets).",
    "inbox": "Read the follow-ups delivered to a session.",
    "flush": "Deliver held and waiting follow-ups now.",
    "reconcile": "Finish dead runners' runs and deliver owed follow-ups.",
    "watch": "Observe all runs and deliver follow-ups live (optional).",
    "doctor": "Live diagnostics (doctor delivery: D0-D8 levels).",
    "mcp": "Serve the coordinator tools over MCP (stdio).",
    "hook": "Harness hook commands (run by Claude Code).",
    "install": "Write the harness configuration (MCP server, hooks).",
    "recipes": "List, show and check recipes (project, user, shipped).",
    "tools": "List tools and their parameters; register one.",
    "run": "Run a tool: sync in the foreground, async detached.",
    "uninstall": "Remove what `actors install` wrote, restoring the original files.",
}

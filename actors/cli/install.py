"""`actors install` / `actors uninstall`."""

from __future__ import annotations

import click

from actors.install import HARNESSES
from runtime.store.layout import StateRoot

_scope = click.option(
    "--project/--user",
    "project",
    default=False,
    help="Configure this project (cwd) or your user account (the default: it works in"
    " every project without an approval prompt, and Codex reads only the user config).",
)


@click.command("install")
@click.argument("harness", type=click.Choice(HARNESSES))
@_scope
@click.option("--dry-run", is_flag=True, help="Print what would be written; change nothing.")
@click.option(
    "--wake",
    type=click.Choice(["hook", "watcher"]),
    default="hook",
    show_default=True,
    help="Claude Code: wake through the FileChanged hook, or have the agent run "
    "`actors inbox wait` as a background task.",
)
@click.option(
    "--cross-session-inbound",
    "inbound",
    type=click.Choice(["accept"]),
    default=None,
    help='Claude Code: also set "crossSessionInbound": "accept", so follow-ups sent through'
    " its messaging socket reach sessions that bypass permissions (else held for review).",
)
def install_cmd(harness: str, project: bool, dry_run: bool, wake: str, inbound: str | None) -> None:
    """Add the actors MCP server (and, for Claude Code, the wake hooks, the read-only tools'
    permission and the status line) to HARNESS's user config (--project: this directory's)."""
    from actors.install import install, next_steps

    scope = "project" if project else "user"
    for item in install(
        StateRoot.from_env(), harness, scope, dry_run=dry_run, wake=wake, inbound=inbound
    ):
        if dry_run:
            click.echo(f"--- {item['path']} ({'would change' if item['changed'] else 'unchanged'})")
            if item["changed"]:
                click.echo(item["content"], nl=False)
        else:
            done = f"wrote {item['what']}" if item["changed"] else "already installed"
            click.echo(f"{item['path']} ({scope}): {done}")
    if not dry_run:
        for step in next_steps(harness)(scope):
            click.echo(f"next: {step}")


@click.command("uninstall")
@click.argument("harness", type=click.Choice(HARNESSES))
@_scope
def uninstall_cmd(harness: str, project: bool) -> None:
    """Undo `actors install`: restore the original bytes, or remove only our entries."""
    from actors.install import uninstall

    for item in uninstall(StateRoot.from_env(), harness, "project" if project else "user"):
        click.echo(f"{item['path']}: {item['action']}")

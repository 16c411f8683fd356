"""`actors completion bash|zsh|fish`: the shell completion script.

Click completes from the command table itself (the lazy group lists every verb, and
each command's own options and choices), so the script stays right as verbs are added:
it only asks `actors` (with `_ACTORS_COMPLETE` set) what may come next. Run ids are
completed for the commands that take a run.
"""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_ACTORS_COMPLETE"


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  eval "$(actors completion bash)"     (e.g. in ~/.bashrc)
    zsh:   eval "$(actors completion zsh)"      (after compinit, in ~/.zshrc)
    fish:  actors completion fish > ~/.config/fish/completions/actors.fish
    """
    from click.shell_completion import get_completion_class

    from actors.cli._app import cli

    complete = get_completion_class(shell)
    assert complete is not None  # every name in SHELLS is one of click's shells
    click.echo(complete(cli, {}, "actors", COMPLETE_VAR).source())


def run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The ids of the runs in the state root that start with what was typed (for the
    arguments that take a run); nothing when the state root cannot be read."""
    try:
        from runtime.store.layout import StateRoot
        from runtime.views.index import list_runs

        bare = incomplete.removeprefix("run:")
        prefix = "run:" if incomplete.startswith("run:") else ""
        runs = list_runs(StateRoot.from_env())
        return [prefix + r["run"] for r in runs if r["run"].startswith(bare)]
    except Exception:  # completion must never print a traceback into the shell
        return []

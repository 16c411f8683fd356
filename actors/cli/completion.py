"""`actors completion bash|zsh|fish`: the shell completion script.

Click completes from the command table itself (the lazy group lists every verb, and
each command's own options and choices), so the script stays right as verbs are added:
it only asks `actors` (with `_ACTORS_COMPLETE` set) what may come next. Run ids are
completed for the commands that take a run (only live ones where only a live run makes
sense: cancel, kill, message), recipe names for spawn, the chosen recipe's parameter
names after `-v`, and the addressed run's accepted message types for message. Each
completer answers nothing rather than fail: a traceback must never reach the shell.
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


def _run_ids(incomplete: str, *, live: bool, prefix: str | None = None) -> list[str]:
    try:
        from runtime.store.layout import StateRoot
        from runtime.views.index import list_runs
        from runtime.views.status import ACTIVE

        bare = incomplete.removeprefix("run:")
        if prefix is None:
            prefix = "run:" if incomplete.startswith("run:") else ""
        runs = list_runs(StateRoot.from_env())
        return [
            prefix + r["run"]
            for r in runs
            if r["run"].startswith(bare) and (not live or r.get("status") in ACTIVE)
        ]
    except Exception:  # completion must never print a traceback into the shell
        return []


def run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The ids of the runs in the state root that start with what was typed (for the
    arguments that take any run); nothing when the state root cannot be read."""
    return _run_ids(incomplete, live=False)


def live_run_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Only the runs still active (starting, queued, running): what cancel and kill act on."""
    return _run_ids(incomplete, live=True)


def live_run_addresses(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """`run:ID` of each active run, for `message` (a finished run takes no messages)."""
    if incomplete and not "run:".startswith(incomplete[:4]):
        return []
    return _run_ids(incomplete, live=True, prefix="run:")


def recipe_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The recipes spawn finds by name (the first of each name in the recipe roots)."""
    try:
        from runtime.compiler.library import list_recipes

        names = dict.fromkeys(e.name for e in list_recipes(validate=False) if e.active)
        return [name for name in names if name.startswith(incomplete)]
    except Exception:
        return []


_VALUED = frozenset(
    ("-t", "--template", "--recipe", "--as", "-v", "--value", "--secret", "--group", "--after",
     "--session")
)  # fmt: skip
"""spawn's options that take a value (the word after them is not the recipe)."""


def _spawn_words(words: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(template, recipe name or file, given value names) from spawn's words as typed.
    Read from the words, not ctx.params: click's resilient parse of a line that ends in
    a bare `-v` drops what came before it."""
    template = recipe = None
    given: list[str] = []
    index = 0
    while index < len(words):
        word, index = words[index], index + 1
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in _VALUED:
            value = inline if eq else (words[index] if index < len(words) else "")
            index += 0 if eq else 1
            if name in ("-t", "--template"):
                template = value
            elif name == "--recipe":
                recipe = value
            elif name in ("-v", "--value"):
                given.append(value.partition("=")[0])
        elif not word.startswith("-") and recipe is None:
            recipe = word
    return template, recipe, given


def value_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """`NAME=` for each parameter of the recipe (or `-t` template) given on the line, not
    given yet; after `NAME=`, an enum parameter's choices."""
    try:
        from runtime.compiler.library import find_recipe, inline_recipe
        from runtime.compiler.params import parameters

        words = list(ctx.parent.args) if ctx.parent is not None else []
        template, recipe, given = _spawn_words(words)
        if template:
            raw = inline_recipe(template).raw
        elif recipe:
            raw = find_recipe(recipe).raw
        else:
            return []
        params = parameters(raw)
        if "=" in incomplete:
            name, _, typed = incomplete.partition("=")
            found = next((p for p in params if p.name == name), None)
            choices = list(found.choices or []) if found is not None else []
            return [f"{name}={c}" for c in choices if str(c).startswith(typed)]
        return [
            f"{p.name}=" for p in params if p.name.startswith(incomplete) and p.name not in given
        ]
    except Exception:
        return []


def message_types(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """The types the addressed run accepts (its recipe's `mailbox.accepts`), then the
    stop and kill every live run takes."""
    try:
        from runtime.messaging.boxes import accepted_types
        from runtime.store.layout import StateRoot, parse_run_ref
        from runtime.views.status import find_run

        address = str(ctx.params.get("address") or "")
        if not address.startswith("run:"):
            return []
        _, record = find_run(StateRoot.from_env(), parse_run_ref(address))
        types = [*accepted_types(record), "control.stop", "control.kill"]
        return [t for t in dict.fromkeys(types) if t.startswith(incomplete)]
    except Exception:
        return []

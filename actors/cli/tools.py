"""Tool commands: tools [ls|register], and `actors run` (a tool by name, sync in the
foreground or async detached)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from actors.cli._format import ProgressLine, emit_json, param_lines, short, summary_line
from actors.cli._options import json_option, session_option
from runtime.core.errors import BadInput
from runtime.core.terminal import cell

_BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")


def _tools_ls(as_json: bool) -> None:
    from runtime.compiler.params import Param
    from runtime.compiler.tools import tool_entries

    tools = tool_entries()
    if as_json:
        emit_json(tools)
        return
    if not tools:
        click.echo("no tools (no recipes found)", err=True)
        return
    for index, tool in enumerate(tools):
        if index:
            click.echo("")
        mode = "async" if tool["async"] else "sync"
        head = f"{tool['name']}  ({tool['root']}, {mode})"
        if tool["status"] != "ok":
            why = f": {tool['problem']}" if tool["problem"] else ""
            click.echo(cell(f"{tool['name']}  ({tool['root']})  {tool['status'].upper()}"))
            click.echo(cell(f"    {tool['path']}{why}"))
            if tool["shadows"]:
                click.echo(cell(f"    (it blocks {', '.join(tool['shadows'])})"))
            continue
        click.echo(cell(f"{head}  {short(tool['description'])}".rstrip()))
        params = [
            Param(
                name=p["name"],
                type=p["type"],
                default=p["default"],
                default_from="x" if p["has_default"] else None,
                required=p["required"],
                choices=tuple(p["choices"] or ()),
                description=p["description"],
            )
            for p in tool["parameters"]
        ]
        for line in param_lines(params):
            click.echo(cell(line))


@click.group("tools", invoke_without_command=True)
@json_option
@click.pass_context
def tools_group(ctx: click.Context, as_json: bool) -> None:
    """List the tools (recipes called by name with typed parameters); register one.

    \b
    Without a subcommand: the same as `actors tools ls`.
      actors tools
      actors tools register git-log --template 'git log -n {count=10} --oneline'
      actors tools register git-log --from-run run:run-k3x9fq
      actors run git-log --count 5
    """
    if ctx.invoked_subcommand is None:
        _tools_ls(as_json)


@tools_group.command("ls")
@json_option
def tools_ls_cmd(as_json: bool) -> None:
    """List every tool with its root, mode (sync/async) and parameters.

    A tool is the recipe a name resolves to: project and user recipes, and the shipped
    ones (marked `shipped`). Parameters come from the placeholders and the `args` key.
    """
    _tools_ls(as_json)


def _recipe_source(
    from_file: str | None,
    template: str | None,
    description: str | None,
    is_async: bool,
    from_run: str | None = None,
) -> tuple[bytes, str]:
    """The recipe `tools register` was given (its bytes, and where they came from)."""
    from runtime.store.writes import dump_json

    if [from_file, template, from_run].count(None) != 2:
        raise BadInput("give the recipe once: --from FILE, --template STR or --from-run RUN")
    if from_run is not None:
        if description is not None or is_async:
            raise BadInput("--description and --async go with --template")
        from runtime.runs.keep import recipe_from_run
        from runtime.store.layout import StateRoot

        return recipe_from_run(StateRoot.from_env(), from_run)
    if from_file is None:
        raw: dict[str, Any] = {}
        if description is not None:
            raw["description"] = description
        if is_async:
            raw["async"] = True
        raw["template"] = template
        return dump_json(raw), "--template"
    if description is not None or is_async:
        raise BadInput(
            "--description and --async go with --template",
            hint="with --from, set them in the file",
        )
    from runtime.compiler.library import MAX_RECIPE_BYTES, recipe_bytes

    if from_file == "-":  # one byte past the cap is enough to refuse it
        return sys.stdin.buffer.read(MAX_RECIPE_BYTES + 1), "stdin"
    path = Path(from_file).expanduser()
    return recipe_bytes(path), str(path)  # a FIFO or a huge file is refused, not read


@tools_group.command("register")
@click.argument("name")
@click.option("--from", "from_file", metavar="FILE", help="Recipe file to register ('-': stdin).")
@click.option("-t", "--template", metavar="STR", help="A one-command recipe from this template.")
@click.option(
    "--from-run",
    "from_run",
    metavar="RUN",
    help="The recipe of a run that succeeded (spawn -t or an ad-hoc file), its values as defaults.",
)
@click.option("--description", metavar="TEXT", help="With --template: the description.")
@click.option("--async", "is_async", is_flag=True, help="With --template: an async tool.")
@click.option(
    "--project/--user",
    "project",
    default=False,
    help="Store it in ./.actors/recipes/ or in the user root (default: --user).",
)
@click.option(
    "--update", "--force", "update", is_flag=True, help="Replace an existing tool of that name."
)
@json_option
def tools_register_cmd(
    name: str,
    from_file: str | None,
    template: str | None,
    from_run: str | None,
    description: str | None,
    is_async: bool,
    project: bool,
    update: bool,
    as_json: bool,
) -> None:
    """Validate a recipe and store it as tool NAME (never replacing one without --update).

    \b
    Examples:
      actors tools register fetch --from ./fetch.json --project
      actors tools register greet -t 'echo hello {who=world}' --description 'Say hello'
      actors tools register greet --from-run run:run-k3x9fq
    """
    from runtime.compiler.library import list_recipes
    from runtime.compiler.params import parameters
    from runtime.compiler.tools import register_tool

    data, label = _recipe_source(from_file, template, description, is_async, from_run)
    scope = "project" if project else "user"
    target, replaced = register_tool(name, data=data, label=label, scope=scope, update=update)
    from runtime.core.bounded_json import decode

    params = parameters(decode(data))  # (register_tool has accepted these very bytes)
    same = [e for e in list_recipes(validate=False) if e.name == name]
    winner = same[0] if same else None
    if as_json:
        emit_json(
            {
                "name": name,
                "path": str(target),
                "root": scope,
                "replaced": replaced,
                "shadowed_by": str(winner.path) if winner and winner.path != target else None,
                "shadows": [str(p) for p in winner.shadows]
                if winner and winner.path == target
                else [],
                "parameters": [p.to_json() for p in params],
            }
        )
        return
    click.echo(f"tool {name} {'updated' if replaced else 'registered'}: {target}")
    for line in param_lines(params):
        click.echo(line)
    if winner is not None and winner.path != target:
        click.echo(
            f"note: {winner.path} ({winner.root}) shadows it; `actors run {name}` uses that one",
            err=True,
        )
    elif winner is not None and winner.shadows:
        shadowed = ", ".join(str(p) for p in winner.shadows)
        click.echo(f"note: it shadows {shadowed}", err=True)


# --- actors run ------------------------------------------------------------------------


def _parse_tool_args(
    tool: Any, tokens: tuple[str, ...], pairs: tuple[str, ...]
) -> dict[str, list[str]]:
    """`--key value`, `--key=value`, a bare `--flag` / `--no-flag` for bool parameters,
    and `-v key=value` pairs, grouped by parameter name."""
    from actors.cli._lifecycle import split_pair
    from runtime.compiler.params import find_param

    given: dict[str, list[str]] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("--") or token == "--":
            raise BadInput(
                f"unexpected argument {token!r}",
                hint="give parameters as --name VALUE (see `actors tools`)",
            )
        key, eq, value = token[2:].partition("=")
        if not eq:
            negated = key.startswith("no-") or key.startswith("no_")
            param = None
            try:
                param = find_param(tool.name, tool.params, key)
            except BadInput:
                base = key[3:] if negated else None
                bool_base = [p for p in tool.params if base and p.name == base.replace("-", "_")]
                if not (bool_base and bool_base[0].type == "bool"):
                    raise
                key, value = bool_base[0].name, "false"
            else:
                following = tokens[index] if index < len(tokens) else None
                if param.type == "bool":
                    if following is not None and following.lower() in _BOOL_WORDS:
                        value, index = following, index + 1
                    else:
                        value = "true"
                elif following is None:
                    raise BadInput(
                        f"--{key} needs a value",
                        hint=f"e.g. --{key} VALUE, or --{key}=VALUE for a value starting with --",
                    )
                else:
                    value, index = following, index + 1
        given.setdefault(key.replace("-", "_"), []).append(value)
    for pair in pairs:
        key, value = split_pair(pair)
        given.setdefault(key, []).append(value)
    return given


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]},
)
@click.argument("tool")
@click.argument("params", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "-v", "--value", "pairs", multiple=True, metavar="KEY=VALUE", help="A parameter (repeatable)."
)
@click.option("--as", "as_", metavar="run:ID", help="Run id to use (default: <tool>-<random>).")
@session_option
@json_option
def run_cmd(
    tool: str,
    params: tuple[str, ...],
    pairs: tuple[str, ...],
    as_: str | None,
    session: str | None,
    as_json: bool,
) -> None:
    """Run tool TOOL with its parameters given as --name VALUE.

    A sync tool runs in the foreground: its output is printed (the last 200 lines or
    64 KiB) and the command exits with the run's code. An async tool (`"async": true`)
    is started detached and its address printed. Values are checked against the tool's
    parameters first: a bad one exits 2 and nothing is started.

    \b
    Examples:
      actors run hello --name ada
      actors run ticker --interval 2
      actors run deploy --env=prod --dry-run
    """
    from runtime.compiler.params import bind_values
    from runtime.compiler.tools import load_tool
    from runtime.runs.spawn import SpawnRequest, spawn
    from runtime.store.layout import StateRoot

    root = StateRoot.from_env()
    found = load_tool(tool, root)
    values = bind_values(found.name, found.params, _parse_tool_args(found, params, pairs))
    request = SpawnRequest(
        recipe=found.name,
        values=values,
        run_id=as_,
        session=session,
        waiter=not found.is_async,  # a sync tool's result is printed here: no follow-up
    )
    record = spawn(request, root=root)
    run_id = record["run"]
    if found.is_async:
        from actors.cli._format import print_started

        print_started(record, as_json, **{"async": True})
        return
    _foreground(root, run_id, session, as_json)


def _foreground(root: Any, run_id: str, session: str | None, as_json: bool) -> None:
    from actors.cli.runs import exit_code, progress_printer
    from runtime.store.reads import read_json
    from runtime.store.tail import OUTPUT_MAX_BYTES, OUTPUT_MAX_LINES, bounded_tail
    from runtime.views.waiting import wait_for

    line = ProgressLine()
    try:
        summary = wait_for(root, run_id, on_tick=progress_printer(run_id, line), hold=True)
    except KeyboardInterrupt:
        line.clear()
        _stop(root, run_id, session)
        raise click.Abort() from None
    line.clear()
    paths = root.run(run_id)
    result = read_json(paths.result) or {}
    output_file = Path(result["output_file"]) if result.get("output_file") else None
    if output_file is None or not output_file.exists():
        output_file = paths.stdout  # no final output (e.g. cancelled): the run's log
    text, cut, size = bounded_tail(output_file)
    code = exit_code(summary)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "address": f"run:{run_id}",
                "status": summary["status"],
                "code": summary.get("code"),
                "reason": summary.get("reason"),
                "output": text,
                "output_cut": cut,
                "output_file": str(output_file) if output_file else None,
            }
        )
        sys.exit(code)
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    if cut:
        click.echo(
            f"actors: output cut: showing its last {text.count(chr(10))} lines of {size} "
            f"bytes (at most {OUTPUT_MAX_LINES} lines / {OUTPUT_MAX_BYTES // 1024} KiB); "
            f"all of it is in {output_file}",
            err=True,
        )
    if summary["status"] != "done":
        errors, _, _ = bounded_tail(paths.stderr, max_lines=40, max_bytes=8192)
        if errors:
            click.echo(errors, err=True, nl=not errors.endswith("\n"))
        click.echo(summary_line(summary), err=True)
    sys.exit(code)


def _stop(root: Any, run_id: str, session: str | None) -> None:
    """Ctrl-C on a foreground tool stops its run (best effort)."""
    from runtime.core.errors import ActorsError
    from runtime.runs.control import cancel
    from runtime.runs.ownership import current_principal

    try:
        cancel(root, run_id, current_principal(root, session), grace=2.0)
        click.echo(f"\nrun:{run_id} cancelled", err=True)
    except (ActorsError, OSError) as exc:
        click.echo(f"\nrun:{run_id} may still be running: {exc}", err=True)

"""Recipe and tool commands: recipes [ls|show|check], tools [ls|register], run."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from actors.cli._format import emit_json, stderr_is_tty, summary_line, table
from actors.cli.runs import json_option, session_option
from runtime.core.errors import BadInput, NotFound

_DESCRIPTION_WIDTH = 60
_BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")


def _short(text: str | None, width: int = _DESCRIPTION_WIDTH) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _looks_like_path(ref: str) -> bool:
    return os.sep in ref or ref.endswith(".json")


def _not_found(name: str) -> NotFound:
    from runtime.compiler.library import recipe_roots

    roots = ", ".join(str(r) for _, r in recipe_roots())
    return NotFound(f"no recipe named {name!r}", hint=f"looked for {name}.json in {roots}")


def _kinds(entries: list[Any]) -> dict[Path, str]:
    return {entry.path: entry.root for entry in entries}


def _status_text(entry: Any, kinds: dict[Path, str]) -> str:
    """`ok`, `disabled`, `invalid`, plus how it relates to same-named recipes."""
    text = str(entry.status)
    if entry.shadowed_by is not None:
        text += f", shadowed by {kinds.get(entry.shadowed_by, entry.shadowed_by)}"
    elif entry.shadows:
        verb = "shadows" if entry.status == "ok" else "blocks"
        text += f", {verb} " + ", ".join(kinds.get(p, str(p)) for p in entry.shadows)
    return text


def _relation_note(entry: Any) -> str:
    """For a check line: which files this one shadows, blocks or is shadowed by."""
    if entry.shadowed_by is not None:
        return f" (shadowed by {entry.shadowed_by})"
    if entry.shadows:
        verb = "shadows" if entry.status == "ok" else "blocks"
        return f" ({verb} {', '.join(str(p) for p in entry.shadows)})"
    return ""


# --- actors recipes --------------------------------------------------------------------


def _recipes_ls(as_json: bool) -> None:
    from runtime.compiler.library import list_recipes, recipe_roots

    entries = list_recipes()
    if as_json:
        emit_json([entry.to_json() for entry in entries])
        return
    if not entries:
        roots = ", ".join(str(r) for _, r in recipe_roots())
        click.echo(f"no recipes in {roots}", err=True)
        return
    kinds = _kinds(entries)
    rows = [
        [entry.name, entry.root, _status_text(entry, kinds), _short(entry.description)]
        for entry in entries
    ]
    click.echo(table(rows, ["NAME", "ROOT", "STATUS", "DESCRIPTION"]))
    broken = [entry for entry in entries if entry.status == "invalid"]
    if broken:
        click.echo("\ninvalid:")
        for entry in broken:
            click.echo(f"  {entry.path}: {entry.problem}")


@click.group("recipes", invoke_without_command=True)
@json_option
@click.pass_context
def recipes_group(ctx: click.Context, as_json: bool) -> None:
    """List, show and check the recipes of the project, user and shipped roots.

    \b
    Without a subcommand: the same as `actors recipes ls`.
      actors recipes
      actors recipes show hello
      actors recipes check
    """
    if ctx.invoked_subcommand is None:
        _recipes_ls(as_json)


@recipes_group.command("ls")
@json_option
def recipes_ls_cmd(as_json: bool) -> None:
    """List every recipe file in lookup order: name, root, status, description.

    A recipe in a higher root (project, then user, then shipped) shadows the ones of the
    same name below it; an invalid or disabled one blocks them. What is wrong with an
    invalid recipe is printed under the table, with its file.
    """
    _recipes_ls(as_json)


def _outline(node: dict[str, Any], depth: int = 0) -> list[str]:
    """A compiled node tree as indented lines (id, label, command or group, settings)."""
    pad = "  " * depth
    label = f"{node['label']}: " if node.get("label") else ""
    notes = []
    if node.get("timeout_ms"):
        notes.append(f"timeout {node['timeout_ms'] / 1000:g}s")
    if (node.get("retry") or 1) > 1:
        notes.append(f"retry {node['retry']}")
    if node.get("failure") not in (None, "continue"):
        notes.append(f"failure={node['failure']}")
    for key in ("when", "repeat", "concurrency", "min_successful"):
        if node.get(key) is not None:
            notes.append(f"{key} {node[key]}")
    if node.get("delay_ms"):
        notes.append(f"delay {node['delay_ms'] / 1000:g}s")
    if node.get("output") not in (None, "stdout"):
        notes.append(f"output {node['output']}")
    if node.get("recover"):
        notes.append(f"recover: {_words(node['recover'])}")
    suffix = f"  ({', '.join(notes)})" if notes else ""
    if node.get("kind") == "leaf":
        return [f"{pad}{node.get('id', '?')} {label}{_words(node.get('words') or [])}{suffix}"]
    children = node.get("children") or []
    lines = [f"{pad}{node.get('id', '?')} {label}{node.get('kind')} of {len(children)}{suffix}"]
    for child in children:
        lines += _outline(child, depth + 1)
    return lines


def _words(words: list[str]) -> str:
    import shlex

    return " ".join(
        shlex.quote(w) if not w or any(c.isspace() or c in "'\"\\" for c in w) else w for w in words
    )


def _param_lines(params: list[Any], indent: str = "    ") -> list[str]:
    if not params:
        return [f"{indent}(none)"]
    rows = []
    for p in params:
        if p.required:
            need = "required"
        elif p.has_default:
            need = f"default {_default_text(p.default)}"
        else:
            need = "optional"
        rows.append([f"--{p.name}", p.describe_type(), need, _short(p.description, 50)])
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return [
        (
            indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3]
        ).rstrip()
        for r in rows
    ]


def _default_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _show_entry(entry: Any, others: list[Any], as_json: bool) -> None:
    from runtime.compiler.params import parameters

    compiled: dict[str, Any] | None = None
    params: list[Any] = []
    if entry.status != "invalid" and entry.raw is not None:
        from runtime.compiler.model import compile_recipe

        compiled = compile_recipe(entry.raw, source=str(entry.path))
        params = parameters(entry.raw)
    if as_json:
        emit_json(
            {
                **entry.to_json(),
                "shadowed": [o.to_json() for o in others],
                "parameters": [p.to_json() for p in params],
                "compiled": compiled,
            }
        )
        return
    mode = "async" if entry.is_async else "sync"
    click.echo(f"{entry.name}  ({entry.root}, {mode})")
    status = entry.status + (f": {entry.problem}" if entry.problem else "")
    details: list[tuple[str, str]] = [("file", str(entry.path)), ("status", status)]
    if entry.shadowed_by is not None:
        details.append(("shadowed", f"by {entry.shadowed_by} (a lookup by name uses that one)"))
    for other in others:
        verb = "shadows" if entry.status == "ok" else "blocks"
        details.append((verb, f"{other.path} ({other.root}, {other.status})"))
    if entry.description:
        details.append(("about", entry.description))
    for key, value in details:
        click.echo(f"  {key:<10}{value}")
    if compiled is None:
        return
    mailbox = compiled.get("mailbox") or {}
    accepts = ", ".join(e["type"] for e in mailbox.get("accepts") or []) or "-"
    emits = ", ".join(e["type"] for e in mailbox.get("emits") or []) or "-"
    click.echo(f"  {'mailbox':<10}accepts {accepts}; emits {emits}")
    artifacts = compiled.get("artifacts") or {}
    if artifacts:
        listed = ", ".join(f"{n}={a['path']}" for n, a in artifacts.items())
        click.echo(f"  {'artifacts':<10}{listed}")
    click.echo("  structure")
    for line in _outline(compiled["root"], 2):
        click.echo(line)
    click.echo("  parameters")
    for line in _param_lines(params):
        click.echo(line)


@recipes_group.command("show")
@click.argument("name")
@json_option
def recipes_show_cmd(name: str, as_json: bool) -> None:
    """Show recipe NAME (or a .json file): where it was found, what it shadows, its
    status, structure and parameters."""
    from runtime.compiler.library import RecipeEntry, check_recipe_file, list_recipes, root_of

    if _looks_like_path(name) and Path(name).expanduser().is_file():
        path = Path(name).expanduser().resolve()
        raw, problem = check_recipe_file(path)
        status = "invalid" if problem or raw is None else "ok"
        if status == "ok" and raw is not None and raw.get("disabled") is True:
            status = "disabled"
        entry = RecipeEntry(path.stem, path, root_of(path), status, problem, raw=raw)
        _show_entry(entry, [], as_json)
        return
    if _looks_like_path(name) and os.sep in name:
        raise NotFound(f"recipe file {name} does not exist", hint="check the path")
    wanted = name.removesuffix(".json")
    entries = [e for e in list_recipes() if e.name == wanted]
    if not entries:
        raise _not_found(wanted)
    _show_entry(entries[0], entries[1:], as_json)


@recipes_group.command("check")
@click.argument("refs", nargs=-1, metavar="[NAME|PATH]...")
@json_option
def recipes_check_cmd(refs: tuple[str, ...], as_json: bool) -> None:
    """Validate every recipe (or the given names and files) and print, per file,
    `PATH: ok` or `PATH: what is wrong`. Exit 2 when any is invalid. Writes nothing.

    A NAME checks every file of that name in the three roots.
    """
    from runtime.compiler.library import RecipeEntry, check_recipe_file, list_recipes, root_of

    results: list[dict[str, Any]] = []
    entries = list_recipes() if not refs or any(not _looks_like_path(r) for r in refs) else []
    selected: list[RecipeEntry] = []
    missing: list[str] = []
    if not refs:
        selected = entries
    for ref in refs:
        if _looks_like_path(ref) and (Path(ref).expanduser().is_file() or os.sep in ref):
            path = Path(ref).expanduser()
            if not path.is_file():
                results.append({"path": ref, "status": "invalid", "problem": "no such file"})
                continue
            raw, problem = check_recipe_file(path.resolve())
            status = "invalid" if problem or raw is None else "ok"
            if status == "ok" and raw is not None and raw.get("disabled") is True:
                status = "disabled"
            selected.append(
                RecipeEntry(path.stem, path.resolve(), root_of(path), status, problem, raw=raw)
            )
            continue
        named = [e for e in entries if e.name == ref.removesuffix(".json")]
        if not named:
            missing.append(ref)
        selected += named
    for entry in selected:
        results.append(
            {
                "path": str(entry.path),
                "name": entry.name,
                "root": entry.root,
                "status": entry.status,
                "problem": entry.problem,
                "note": _relation_note(entry).strip(" ()") or None,
            }
        )
    for ref in missing:
        results.append(
            {"path": ref, "status": "invalid", "problem": "no recipe by that name in any root"}
        )
    bad = [r for r in results if r["status"] == "invalid"]
    if as_json:
        emit_json(results)
    else:
        for r in results:
            notes = [r["note"]] if r.get("note") else []
            if r["status"] == "invalid":
                line = f"{r['path']}: {r['problem']}"
            else:
                line = f"{r['path']}: ok"
                notes = ["disabled"] * (r["status"] == "disabled") + notes
            click.echo(line + (f" ({'; '.join(notes)})" if notes else ""))
        if not results:
            click.echo("no recipes to check", err=True)
        else:
            click.echo(f"{len(results)} checked, {len(bad)} invalid", err=True)
    if bad:
        sys.exit(2)


# --- actors tools ----------------------------------------------------------------------


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
            click.echo(f"{tool['name']}  ({tool['root']})  {tool['status'].upper()}")
            click.echo(f"    {tool['path']}{why}")
            if tool["shadows"]:
                click.echo(f"    (it blocks {', '.join(tool['shadows'])})")
            continue
        click.echo(f"{head}  {_short(tool['description'])}".rstrip())
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
        for line in _param_lines(params):
            click.echo(line)


@click.group("tools", invoke_without_command=True)
@json_option
@click.pass_context
def tools_group(ctx: click.Context, as_json: bool) -> None:
    """List the tools (recipes called by name with typed parameters); register one.

    \b
    Without a subcommand: the same as `actors tools ls`.
      actors tools
      actors tools register git-log --template 'git log -n {count=10} --oneline'
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


@tools_group.command("register")
@click.argument("name")
@click.option("--from", "from_file", metavar="FILE", help="Recipe file to register ('-': stdin).")
@click.option("-t", "--template", metavar="STR", help="A one-command recipe from this template.")
@click.option("--description", metavar="TEXT", help="With --template: the description.")
@click.option("--async", "is_async", is_flag=True, help="With --template: an async tool.")
@click.option(
    "--project/--user",
    "project",
    default=False,
    help="Store it in ./.actors/recipes/ or in the user root (default: --user).",
)
@click.option("--update", is_flag=True, help="Replace an existing tool of that name.")
@json_option
def tools_register_cmd(
    name: str,
    from_file: str | None,
    template: str | None,
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
    """
    from runtime.compiler.library import list_recipes
    from runtime.compiler.params import parameters
    from runtime.compiler.tools import register_tool
    from runtime.store.writes import dump_json

    if (from_file is None) == (template is None):
        raise BadInput("give the recipe once: either --from FILE or --template STR")
    if from_file is not None:
        if description is not None or is_async:
            raise BadInput(
                "--description and --async go with --template",
                hint="with --from, set them in the file",
            )
        if from_file == "-":
            data, label = sys.stdin.buffer.read(), "stdin"
        else:
            path = Path(from_file).expanduser()
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise NotFound(f"cannot read {from_file}: {exc.strerror}") from None
            label = str(path)
    else:
        raw: dict[str, Any] = {}
        if description is not None:
            raw["description"] = description
        if is_async:
            raw["async"] = True
        raw["template"] = template
        data, label = dump_json(raw), "--template"
    scope = "project" if project else "user"
    target, replaced = register_tool(name, data=data, label=label, scope=scope, update=update)
    import json

    params = parameters(json.loads(data))
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
    for line in _param_lines(params):
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
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(f"-v {pair!r} is not KEY=VALUE", hint="e.g. -v source=~/Music")
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
    record = spawn(
        SpawnRequest(recipe=found.name, values=values, run_id=as_, session=session), root=root
    )
    run_id = record["run"]
    if found.is_async:
        from actors.cli._format import print_started

        print_started(record, as_json, **{"async": True})
        return
    _foreground(root, run_id, session, as_json)


def _foreground(root: Any, run_id: str, session: str | None, as_json: bool) -> None:
    from actors.cli.runs import _exit_code, _progress_printer
    from runtime.runs.waiting import wait_for
    from runtime.store.reads import read_json
    from runtime.store.tail import OUTPUT_MAX_BYTES, OUTPUT_MAX_LINES, bounded_tail

    try:
        summary = wait_for(root, run_id, on_tick=_progress_printer(run_id))
    except KeyboardInterrupt:
        _stop(root, run_id, session)
        raise click.Abort() from None
    if stderr_is_tty():
        click.echo("\r" + " " * 78 + "\r", err=True, nl=False)
    paths = root.run(run_id)
    result = read_json(paths.result) or {}
    output_file = Path(result["output_file"]) if result.get("output_file") else None
    if output_file is None or not output_file.exists():
        output_file = paths.stdout  # no final output (e.g. cancelled): the run's log
    text, cut, size = bounded_tail(output_file)
    code = _exit_code(summary)
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

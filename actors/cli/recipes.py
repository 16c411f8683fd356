"""Recipe commands: recipes [ls|show|check]. Tools and `actors run` are in actors.cli.tools."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from actors.cli._format import emit_json, param_lines, short, table
from actors.cli._options import json_option
from runtime.core.errors import NotFound
from runtime.core.terminal import cell


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
        [entry.name, entry.root, _status_text(entry, kinds), short(entry.description)]
        for entry in entries
    ]
    click.echo(table(rows, ["NAME", "ROOT", "STATUS", "DESCRIPTION"]))
    broken = [entry for entry in entries if entry.status == "invalid"]
    if broken:
        click.echo("\ninvalid:")
        for entry in broken:
            click.echo(f"  {cell(entry.path)}: {cell(entry.problem)}")


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
    click.echo(f"{cell(entry.name)}  ({entry.root}, {mode})")
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
        click.echo(f"  {key:<10}{cell(value)}")
    if compiled is None:
        return
    mailbox = compiled.get("mailbox") or {}
    accepts = ", ".join(e["type"] for e in mailbox.get("accepts") or []) or "-"
    emits = ", ".join(e["type"] for e in mailbox.get("emits") or []) or "-"
    click.echo(f"  {'mailbox':<10}accepts {accepts}; emits {emits}")
    artifacts = compiled.get("artifacts") or {}
    if artifacts:
        listed = ", ".join(f"{n}={a['path']}" for n, a in artifacts.items())
        click.echo(f"  {'artifacts':<10}{cell(listed)}")
    click.echo("  structure")
    for line in _outline(compiled["root"], 2):
        click.echo(cell(line))  # a recipe's words: a newline in one cannot forge a line
    click.echo("  parameters")
    for line in param_lines(params):
        click.echo(cell(line))


@recipes_group.command("show")
@click.argument("name")
@json_option
def recipes_show_cmd(name: str, as_json: bool) -> None:
    """Show recipe NAME (or a .json file): where it was found, what it shadows, its
    status, structure and parameters."""
    from runtime.compiler.library import (
        RecipeEntry,
        check_recipe_file,
        list_recipes,
        recipe_bytes,
        root_of,
    )

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
        if Path(name).expanduser().exists():  # a FIFO, a directory: say what it is not
            recipe_bytes(Path(name).expanduser())
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
            if not path.is_file():  # a FIFO or a directory is not missing: say what it is
                what = "not a regular file" if path.exists() else "no such file"
                results.append({"path": ref, "status": "invalid", "problem": what})
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
            click.echo(cell(line + (f" ({'; '.join(notes)})" if notes else "")))
        if not results:
            click.echo("no recipes to check", err=True)
        else:
            click.echo(f"{len(results)} checked, {len(bad)} invalid", err=True)
    if bad:
        sys.exit(2)

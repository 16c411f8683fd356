"""Registered tools: recipes called by name with typed parameters.

Every recipe a name resolves to (project `.actors/recipes/`, user
`~/.config/actors/recipes/`, and the shipped ones, marked `shipped`) is a tool; its
parameters come from `runtime.compiler.params`. Calling a tool (spawning it) is
`runtime.runs.invoke`, above this room.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.compiler.library import (
    MAX_RECIPE_BYTES,
    compile_source,
    find_recipe,
    list_recipes,
    recipe_problem,
    recipe_roots,
    root_of,
)
from runtime.compiler.params import Param, parameters
from runtime.core.bounded_json import INPUT_DEPTH, Undecodable, decode
from runtime.core.errors import BadInput, Conflict
from runtime.core.ids import is_valid_id
from runtime.store.writes import ensure_dir, write_bytes_atomic


@dataclass
class Tool:
    """A recipe resolved by name, ready to be called."""

    name: str
    path: Path
    root: str
    raw: dict[str, Any]
    params: list[Param] = field(default_factory=list)

    @property
    def is_async(self) -> bool:
        return self.raw.get("async") is True

    @property
    def description(self) -> str | None:
        value = self.raw.get("description")
        return value if isinstance(value, str) else None


def load_tool(name: str, root: Any = None) -> Tool:
    """Resolve, validate and describe the tool NAME (BadInput / NotFound otherwise).

    `root` (a StateRoot) lets the validation use the compile cache, so calling a known
    tool does not import pydantic; nothing is written here.
    """
    if not is_valid_id(name) or name.endswith(".json"):
        raise BadInput(
            f"invalid tool name {name!r}",
            hint="a tool is called by its name (letters, digits, '._-'); "
            "use `actors spawn FILE` to run a recipe file",
        )
    source = find_recipe(name)
    compile_source(source, root)  # raises BadInput naming the file when it is invalid
    assert source.file is not None
    try:
        params = parameters(source.raw)
    except BadInput as exc:
        raise BadInput(f"{source.label}: {exc.message}", hint=exc.hint) from None
    return Tool(name, source.file, root_of(source.file), source.raw, params)


def tool_entries() -> list[dict[str, Any]]:
    """Every tool (the recipe each name resolves to), with its parameters or what is
    wrong with it, in lookup order (project, user, shipped)."""
    tools = []
    for entry in list_recipes():
        if not entry.active:
            continue
        item: dict[str, Any] = {
            "name": entry.name,
            "root": entry.root,
            "path": str(entry.path),
            "status": entry.status,
            "problem": entry.problem,
            "async": entry.is_async,
            "description": entry.description,
            "shadows": [str(p) for p in entry.shadows],
            "parameters": [],
        }
        if entry.status != "invalid" and entry.raw is not None:
            item["parameters"] = [p.to_json() for p in parameters(entry.raw)]
        tools.append(item)
    return tools


# --- registering tools -----------------------------------------------------------------


def register_tool(
    name: str,
    *,
    data: bytes,
    label: str,
    scope: str = "user",
    update: bool = False,
) -> tuple[Path, bool]:
    """Validate the recipe `data` and store it as `<root>/<name>.json` in the user or
    project root: a new file is created atomically (0600, directories 0700) and never
    replaces an existing one unless `update`. Returns `(path, replaced)`."""
    if not is_valid_id(name) or name.endswith(".json"):
        raise BadInput(
            f"invalid tool name {name!r}", hint="use letters, digits and '._-' (e.g. git-log)"
        )
    if len(data) > MAX_RECIPE_BYTES:
        raise BadInput(f"{label}: the recipe is {len(data)} bytes; the limit is {MAX_RECIPE_BYTES}")
    try:
        raw = decode(data, max_bytes=MAX_RECIPE_BYTES, max_depth=INPUT_DEPTH)
    except Undecodable as exc:
        raise BadInput(f"{label}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{label}: a recipe is a JSON object, not {type(raw).__name__}")
    problem = recipe_problem(raw, label)
    if problem:
        raise BadInput(f"{label}: {problem}", hint="nothing was written")
    roots = dict(recipe_roots())
    if scope not in ("user", "project") or scope not in roots:
        raise BadInput(f"cannot register in the {scope} root", hint="use --user or --project")
    directory = roots[scope]
    target = directory / f"{name}.json"
    exists = target.exists() or target.is_symlink()
    if exists and not update:
        raise Conflict(
            f"tool {name} already exists at {target}",
            hint="pass --force to replace it (nothing was written)",
        )
    ensure_dir(directory)
    if update:
        write_bytes_atomic(target, data)
        return target, exists
    stage = directory / f".{name}.json.{os.getpid()}.{os.urandom(4).hex()}.new"
    write_bytes_atomic(stage, data)
    try:
        os.link(stage, target)  # fails if the name appeared meanwhile: never overwrite
    except FileExistsError:
        raise Conflict(
            f"tool {name} already exists at {target}",
            hint="pass --force to replace it (nothing was written)",
        ) from None
    finally:
        stage.unlink(missing_ok=True)
    return target, False

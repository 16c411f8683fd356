"""Finding, loading and compiling recipes, with a compile cache.

Validation goes through the pydantic model in `runtime.recipe_model`, which costs more to
import than the rest of a CLI call. The normalized result is therefore cached under
`<root>/cache/recipes/` keyed by the sha256 of the recipe's canonical JSON and the
compiler version: a recipe is validated once per content, and `actors spawn` of a known
recipe stays on the fast path (the cache is a plain optimisation: deleting it is safe).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.errors import BadInput, NotFound, StateDamaged
from runtime.files import ensure_dir, read_json, write_json_atomic
from runtime.ids import is_valid_id
from runtime.paths import StateRoot

MAX_RECIPE_BYTES = 1024 * 1024
_COMPILER_KEY = "actors-recipe-compiler/1"


@dataclass(frozen=True)
class RecipeSource:
    """Where a recipe came from, recorded in run.json."""

    name: str | None
    file: Path | None
    raw: dict[str, Any]

    @property
    def label(self) -> str:
        if self.file is not None:
            return str(self.file)
        return "--template"


def search_dirs() -> list[Path]:
    """Recipe roots, highest priority first: project, user, shipped."""
    from recipes import SHIPPED_DIR

    config = os.environ.get("XDG_CONFIG_HOME")
    user = (Path(config).expanduser() if config else Path.home() / ".config") / "actors"
    return [Path.cwd() / ".actors" / "recipes", user / "recipes", SHIPPED_DIR]


def _read_recipe_file(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise NotFound(f"cannot read recipe {path}: {exc.strerror}") from exc
    if size > MAX_RECIPE_BYTES:
        raise BadInput(f"recipe {path} is {size} bytes; the limit is {MAX_RECIPE_BYTES}")
    try:
        raw = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"recipe {path} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except UnicodeDecodeError:
        raise BadInput(f"recipe {path} is not UTF-8 text") from None
    if not isinstance(raw, dict):
        raise BadInput(f"recipe {path}: a recipe is a JSON object")
    return raw


def find_recipe(ref: str) -> RecipeSource:
    """Resolve a recipe path or name (`hello`, `./x.json`, `recipes/x.json`)."""
    as_path = Path(ref).expanduser()
    if os.sep in ref or ref.endswith(".json"):
        if as_path.is_file():
            resolved = as_path.resolve()
            return RecipeSource(resolved.stem, resolved, _read_recipe_file(resolved))
        if os.sep in ref:
            raise NotFound(f"recipe file {ref} does not exist", hint="check the path")
    name = ref.removesuffix(".json")
    if not is_valid_id(name):
        raise BadInput(f"invalid recipe name {ref!r}", hint="use a file path or a plain name")
    for root in search_dirs():
        candidate = root / f"{name}.json"
        if candidate.is_file():
            raw = _read_recipe_file(candidate)
            if raw.get("disabled") is True:
                raise BadInput(
                    f"recipe {name} at {candidate} is disabled",
                    hint='remove "disabled": true from it, or pass a file path',
                )
            return RecipeSource(name, candidate.resolve(), raw)
    roots = ", ".join(str(r) for r in search_dirs())
    raise NotFound(f"no recipe named {name!r}", hint=f"looked for {name}.json in {roots}")


def inline_recipe(template: str) -> RecipeSource:
    """A recipe made of one inline template string."""
    return RecipeSource(None, None, {"template": template})


@dataclass
class Compiled:
    """A compiled recipe and where its cache entry lives."""

    data: dict[str, Any]
    cache_file: Path | None
    from_cache: bool

    def remember(self) -> None:
        """Write (or refresh) the cache entry; called once the spawn has succeeded, so a
        failed spawn leaves the state root untouched. Best effort: the cache is only an
        optimisation."""
        if self.cache_file is None:
            return
        try:
            if self.from_cache:
                os.utime(self.cache_file)  # mark as used, for the 30-day sweep
            else:
                ensure_dir(self.cache_file.parent)
                write_json_atomic(self.cache_file, self.data, fsync=False)
        except OSError:
            pass


def compile_source(source: RecipeSource, root: StateRoot | None) -> Compiled:
    """The compiled recipe, from the cache when this exact content was compiled before.

    Nothing is written here; call `Compiled.remember()` to fill the cache.
    """
    canonical = json.dumps(source.raw, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{_COMPILER_KEY}\n{canonical}".encode()).hexdigest()
    cache_file = root.cache / "recipes" / f"{digest}.json" if root else None
    if cache_file is not None:
        try:
            cached = read_json(cache_file)
        except StateDamaged:
            cached = None
        if isinstance(cached, dict) and cached.get("root"):
            return Compiled(cached, cache_file, from_cache=True)
    from runtime.recipe_model import compile_recipe

    return Compiled(compile_recipe(source.raw, source=source.label), cache_file, from_cache=False)

"""Finding, loading and compiling recipes, with a compile cache.

Validation goes through the pydantic model in `runtime.compiler.model`, which costs more to
import than the rest of a CLI call. The normalized result is therefore cached under
`<root>/cache/recipes/` keyed by the sha256 of the recipe's canonical JSON and the
compiler version: a recipe is validated once per content, and `actors spawn` of a known
recipe stays on the fast path (the cache is a plain optimisation: deleting it is safe).

Discovery: a name is looked up in three roots, highest priority first (project, user,
shipped). The first file with that name wins, and it wins even when it is invalid or
`disabled`: such a file blocks the lower ones (the error names both files) instead of
silently falling back to them. `list_recipes()` reports every file, shadowed or not.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from runtime.core import config
from runtime.core.bounded_json import INPUT_DEPTH, TooDeep, Undecodable, decode
from runtime.core.errors import ActorsError, BadInput, NotFound, StateDamaged
from runtime.core.ids import is_valid_id
from runtime.store import safe
from runtime.store.layout import StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_json_atomic

MAX_RECIPE_BYTES = 1024 * 1024
_COMPILER_KEY = "actors-recipe-compiler/3"
"""Bumped when the compiled form or its checks change (2: a parallel `repeat` leaf keeps
`concurrency` and `min_successful`; 3: shell operators are refused), so no cached tree of
an older compiler is reused."""


class RecipeSource(NamedTuple):
    """Where a recipe came from, recorded in run.json."""

    name: str | None
    file: Path | None
    raw: dict[str, Any]
    shadows: Path | None = None
    """A lower-priority recipe of the same name that this one hides (named in errors)."""

    @property
    def label(self) -> str:
        if self.file is not None:
            if self.shadows is not None:
                return f"{self.file} (which blocks {self.shadows})"
            return str(self.file)
        return "--template"


def search_dirs() -> list[Path]:
    """Recipe roots, highest priority first: project, user, shipped."""
    from recipes import SHIPPED_DIR

    user = Path(config.path(config.XDG_CONFIG_HOME)) / "actors"
    return [Path.cwd() / ".actors" / "recipes", user / "recipes", SHIPPED_DIR]


def _read_recipe_file(path: Path) -> dict[str, Any]:
    data = recipe_bytes(path)
    try:
        raw = decode(data, max_bytes=MAX_RECIPE_BYTES, max_depth=INPUT_DEPTH)
    except TooDeep:
        raise BadInput(f"recipe {path} is nested too deeply to be a recipe") from None
    except Undecodable as exc:
        raise BadInput(f"recipe {path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"recipe {path}: a recipe is a JSON object")
    return raw


class _Unusable(Exception):
    """A recipe file that is not read: too large, or not a regular file."""


def recipe_bytes(path: Path) -> bytes:
    """A recipe file's bytes (`_recipe_bytes`): NotFound when it cannot be read, BadInput
    when it is too large or not a regular file."""
    try:
        return _recipe_bytes(path)
    except OSError as exc:
        raise NotFound(f"cannot read recipe {path}: {exc.strerror}") from exc
    except _Unusable as exc:
        raise BadInput(f"recipe {path} {exc}") from None


def _recipe_bytes(path: Path) -> bytes:
    """A recipe file's bytes, read only when it is a regular file within the size cap
    (a FIFO in a recipe folder is never waited on, a huge file never read): a recipe
    folder holds files anyone with access to the project could have put there."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unusable("is not a regular file")
        if st.st_size > MAX_RECIPE_BYTES:
            raise _Unusable(f"is {st.st_size} bytes; the limit is {MAX_RECIPE_BYTES}")
        chunks, size = [], 0
        while size <= MAX_RECIPE_BYTES and (chunk := os.read(fd, MAX_RECIPE_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def find_recipe(ref: str) -> RecipeSource:
    """Resolve a recipe path or name (`hello`, `./x.json`, `recipes/x.json`).

    A name resolves to the first `<name>.json` in `recipe_roots()` order. When that file
    is unreadable, malformed or disabled, the lookup fails and says which lower-priority
    file it blocks: there is no silent fallback.
    """
    as_path = Path(ref).expanduser()
    if os.sep in ref or ref.endswith(".json"):
        if as_path.is_file():
            resolved = as_path.resolve()
            return RecipeSource(resolved.stem, resolved, _read_recipe_file(resolved))
        if os.sep in ref and as_path.exists():  # a FIFO, a directory, a device: say so
            _read_recipe_file(as_path)  # raises, naming what the file is not
        if os.sep in ref:
            raise NotFound(f"recipe file {ref} does not exist", hint="check the path")
    name = ref.removesuffix(".json")
    if not is_valid_id(name):
        raise BadInput(f"invalid recipe name {ref!r}", hint="use a file path or a plain name")
    candidates = [root / f"{name}.json" for _, root in recipe_roots()]
    found = [c for c in candidates if c.is_file()]
    if not found:
        roots = ", ".join(str(r) for _, r in recipe_roots())
        raise NotFound(f"no recipe named {name!r}", hint=f"looked for {name}.json in {roots}")
    winner, blocked = found[0], (found[1] if len(found) > 1 else None)
    try:
        raw = _read_recipe_file(winner)
    except ActorsError as exc:
        if blocked is None:
            raise
        raise type(exc)(
            f"{exc.message}; it blocks {blocked} (an invalid recipe is not skipped)",
            hint=f"fix or delete {winner}",
        ) from None
    if raw.get("disabled") is True:
        if blocked is not None:
            raise BadInput(
                f"recipe {name} at {winner} is disabled, and it blocks {blocked}",
                hint=f'delete {winner} to use the other one, remove "disabled": true '
                "from it, or pass a file path",
            )
        raise BadInput(
            f"recipe {name} at {winner} is disabled",
            hint='remove "disabled": true from it, or pass a file path',
        )
    return RecipeSource(name, winner.resolve(), raw, shadows=blocked)


ROOT_KINDS = ("project", "user", "shipped")


def recipe_roots() -> list[tuple[str, Path]]:
    """`(kind, directory)` for each recipe root, highest priority first; a directory that
    is the same as a higher one (an odd XDG_CONFIG_HOME) is listed once."""
    roots: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for kind, directory in zip(ROOT_KINDS, search_dirs(), strict=True):
        key = directory.resolve()
        if key not in seen:
            seen.add(key)
            roots.append((kind, directory))
    return roots


def root_of(path: Path) -> str:
    """The kind of root that holds this recipe file, or `file` for any other place."""
    parent = path.resolve().parent
    for kind, directory in recipe_roots():
        if directory.resolve() == parent:
            return kind
    return "file"


class RecipeEntry(NamedTuple):
    """One recipe file found in a root, as `actors recipes` reports it."""

    name: str
    path: Path
    root: str
    status: str
    """`ok`, `invalid` (see `problem`) or `disabled`."""
    problem: str | None = None
    """One line saying what is wrong (without the path), for `invalid`."""
    shadowed_by: Path | None = None
    shadows: tuple[Path, ...] = ()
    raw: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        """The file a lookup by this name resolves to (it is not shadowed)."""
        return self.shadowed_by is None and is_valid_id(self.name)

    @property
    def description(self) -> str | None:
        value = (self.raw or {}).get("description")
        return value if isinstance(value, str) else None

    @property
    def is_async(self) -> bool:
        return (self.raw or {}).get("async") is True

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "root": self.root,
            "status": self.status,
            "problem": self.problem,
            "shadowed_by": str(self.shadowed_by) if self.shadowed_by else None,
            "shadows": [str(p) for p in self.shadows],
            "description": self.description,
            "async": self.is_async,
        }


def load_recipe_file(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The parsed recipe, or None and one line saying why it cannot be used."""
    try:
        data = _recipe_bytes(path)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    except _Unusable as exc:
        return None, str(exc)
    try:
        raw = decode(data, max_bytes=MAX_RECIPE_BYTES, max_depth=INPUT_DEPTH)
    except TooDeep:
        return None, "nested too deeply to be a recipe"
    except Undecodable as exc:
        return None, f"not valid JSON: {exc}"
    if not isinstance(raw, dict):
        return None, f"a recipe is a JSON object, not {type(raw).__name__}"
    return raw, None


def recipe_problem(raw: dict[str, Any], label: str) -> str | None:
    """Validate a parsed recipe as a spawn would (schema, template syntax) and as a tool
    (its `args` and the parameters derived from its placeholders). None when it is good,
    else one line naming the place in the recipe; `label` is stripped from the front."""
    from runtime.compiler.model import compile_recipe
    from runtime.compiler.params import parameters

    try:
        compile_recipe(raw, source=label)
        parameters(raw)
    except ActorsError as exc:
        text = exc.message.removeprefix(f"{label}: ")
        return f"{text}; {exc.hint}" if exc.hint else text
    return None


def check_recipe_file(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Read and validate one recipe file: `(raw, problem)`. Writes nothing."""
    raw, problem = load_recipe_file(path)
    if raw is not None:
        problem = recipe_problem(raw, str(path))
    return raw, problem


def list_recipes(*, validate: bool = True) -> list[RecipeEntry]:
    """Every `*.json` file in the recipe roots, in lookup order (root priority, then name).

    Each entry says whether it is usable (`ok`), `invalid` (with the reason) or
    `disabled`, which file shadows it and which files it shadows. Without `validate` only
    the JSON is read (no schema check, so pydantic is not imported).
    """
    found: list[tuple[str, Path, dict[str, Any] | None, str | None]] = []
    for kind, directory in recipe_roots():
        try:
            files = sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))
        except OSError:
            continue
        for path in files:
            if not path.is_file():
                continue
            name = path.stem
            if not is_valid_id(name):
                found.append((kind, path, None, "the file name is not a valid recipe name"))
                continue
            raw, problem = check_recipe_file(path) if validate else load_recipe_file(path)
            found.append((kind, path, raw, problem))
    by_name: dict[str, list[Path]] = {}
    for _, path, _, _ in found:
        if is_valid_id(path.stem):
            by_name.setdefault(path.stem, []).append(path)
    entries = []
    for kind, path, raw, problem in found:
        same = by_name.get(path.stem, [path])
        position = same.index(path) if path in same else 0
        if problem or raw is None:
            status = "invalid"
        else:
            status = "disabled" if raw.get("disabled") is True else "ok"
        entries.append(
            RecipeEntry(
                name=path.stem,
                path=path,
                root=kind,
                status=status,
                problem=problem,
                shadowed_by=same[0] if position else None,
                shadows=tuple(same[position + 1 :]) if position == 0 else (),
                raw=raw,
            )
        )
    return entries


def inline_recipe(template: str) -> RecipeSource:
    """A recipe made of one inline template string."""
    return RecipeSource(None, None, {"template": template})


class Compiled(NamedTuple):
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
                fd = safe.open_file(self.cache_file, os.O_RDONLY)  # never through a link
                try:
                    os.utime(fd)  # mark as used, for the 30-day sweep
                finally:
                    os.close(fd)
            else:
                ensure_dir(self.cache_file.parent)
                write_json_atomic(self.cache_file, self.data, fsync=False)
        except (OSError, StateDamaged):
            pass


def compile_source(source: RecipeSource, root: StateRoot | None) -> Compiled:
    """The compiled recipe, from the cache when this exact content was compiled before.

    Nothing is written here; call `Compiled.remember()` to fill the cache.
    """
    canonical = json.dumps(source.raw, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(f"{_COMPILER_KEY}\n{canonical}".encode()).hexdigest()
    cache_file = root.recipe_cache / f"{digest}.json" if root else None
    if cache_file is not None:
        try:
            cached = read_json(cache_file)
        except StateDamaged:
            cached = None
        if isinstance(cached, dict) and cached.get("root"):
            return Compiled(cached, cache_file, from_cache=True)
    from runtime.compiler.model import compile_recipe

    directory = str(source.file.parent) if source.file else None
    compiled = compile_recipe(
        source.raw, source=source.label, resolve=_resolve_import, directory=directory
    )
    if source.raw.get("imports"):
        cache_file = None  # the result depends on other files too: compile every time
    return Compiled(compiled, cache_file, from_cache=False)


def _resolve_import(ref: str, directory: str | None) -> tuple[str, dict[str, Any], str | None]:
    """An `imports` entry: a recipe name, or a path relative to the importing recipe."""
    if os.sep in ref or ref.endswith(".json"):
        path = Path(ref).expanduser()
        if not path.is_absolute() and directory is not None:
            path = Path(directory) / path
        source = find_recipe(str(path) if os.sep in str(path) else f"./{path}")
    else:
        source = find_recipe(ref)
    return source.label, source.raw, str(source.file.parent) if source.file else None

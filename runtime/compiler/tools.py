"""Registered tools: recipes called by name with typed parameters.

Every recipe a name resolves to (project `.actors/recipes/`, user
`~/.config/actors/recipes/`, and the shipped ones, marked `shipped`) is a tool. Its
parameters are derived from two sources, read from the raw recipe so that they do not
depend on the compiled form:

- the placeholders of its templates (`{name}`, `{name=default}`, `{name??fallback}`,
  `{items.length}`, ...), in order of appearance; the injected names (`run_id`, ...) and,
  inside a `repeat` node, its index variables are not parameters;
- the recipe's `args`, which declare a type (`string`, `int`, `number`, `bool`, `array`,
  `enum`, `path`), a default, enum choices and a description, in either form the recipe
  model accepts (an object, or pi-actors' `["n:int", "mode:enum(a,b)"]` / `"n:int, f:path"`).

A parameter's default is the first of: the recipe's `values`, its `defaults`, the `args`
default, the placeholder's inline default. It is required when it has none and some
placeholder needs it (`{x}`; `{x??fb}`, `{x?a:b}` and `when` conditions do not).

Values given for a tool (`actors run TOOL --key value`, or a `tool:NAME` message body)
are checked and converted here, before anything is spawned: an unknown name, a badly
typed value or a missing required parameter is a `BadInput` (exit 2, nothing written).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.compiler.values import args_as_mapping
from runtime.core.errors import BadInput, Conflict
from runtime.core.ids import is_valid_id, is_valid_name

ARG_TYPES = ("string", "int", "number", "bool", "array", "enum", "path")
_ARG_KEYS = {"type", "values", "default", "description"}
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
_REPEAT_VARS = ("index", "prev", "next", "repeat")
OUTPUT_MAX_LINES = 200
OUTPUT_MAX_BYTES = 64 * 1024


def _injected() -> tuple[str, ...]:
    from runtime.runs.spawn import INJECTED

    return INJECTED


@dataclass(frozen=True)
class Param:
    """One parameter of a tool."""

    name: str
    type: str = "string"
    default: Any = None
    default_from: str | None = None
    """Where the default comes from: `values`, `defaults`, `args`, `inline`, or None."""
    required: bool = False
    choices: tuple[str, ...] = ()
    description: str | None = None
    declared: bool = False
    """Declared in `args` (else only found in a placeholder)."""

    @property
    def has_default(self) -> bool:
        return self.default_from is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "has_default": self.has_default,
            "required": self.required,
            "choices": list(self.choices) or None,
            "description": self.description,
        }

    def describe_type(self) -> str:
        return f"enum {'|'.join(self.choices)}" if self.type == "enum" else self.type


# --- deriving parameters ---------------------------------------------------------------


def declared_args(raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The recipe's `args`, normalized to `{name: {type, values, default, description}}`.

    Raises BadInput naming the place (`args.n.type: ...`) when it is malformed.
    """
    spec = raw.get("args")
    if spec is None:
        return {}
    try:
        spec = args_as_mapping(spec)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if not isinstance(spec, dict):
        raise BadInput("args: must be an object {name: {type, default, ...}} or 'name:type' list")
    out: dict[str, dict[str, Any]] = {}
    for name, item in spec.items():
        where = f"args.{name}"
        if not is_valid_name(name):
            raise BadInput(f"args: {name!r} is not a valid name (letters, digits, '_')")
        if name in _injected():
            raise BadInput(f"{where}: {name} is set by the runtime; it cannot be a parameter")
        if not isinstance(item, dict):
            raise BadInput(f'{where}: must be an object such as {{"type": "int"}}')
        unknown = sorted(set(item) - _ARG_KEYS)
        if unknown:
            raise BadInput(
                f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(_ARG_KEYS))})"
            )
        kind = item.get("type", "string")
        if kind not in ARG_TYPES:
            raise BadInput(f"{where}.type: {kind!r} is not one of {', '.join(ARG_TYPES)}")
        choices = item.get("values")
        if kind == "enum":
            if (
                not isinstance(choices, list)
                or not choices
                or not all(isinstance(c, str) for c in choices)
            ):
                raise BadInput(f"{where}.values: an enum needs a non-empty list of strings")
        elif choices is not None:
            raise BadInput(f"{where}.values: only an enum has choices")
        description = item.get("description")
        if description is not None and not isinstance(description, str):
            raise BadInput(f"{where}.description: must be a string")
        default = item.get("default")
        normalized = {
            "type": kind,
            "values": list(choices) if choices else None,
            "default": default,
            "description": description,
        }
        if default is not None:
            probe = Param(name, kind, choices=tuple(choices or ()))
            try:
                normalized["default"] = coerce(probe, default)
            except ValueError as exc:
                raise BadInput(f"{where}.default: {exc}") from None
        out[name] = normalized
    return out


@dataclass
class _Use:
    required: bool = False
    inline: str | None = None
    array: bool = False


def _walk_refs(raw: Mapping[str, Any]) -> Iterator[tuple[Any, bool, bool]]:
    """`(ref, optional_context, inside_repeat)` for every placeholder of the recipe."""
    from runtime.compiler.placeholders import references, split_words

    def nodes(node: Mapping[str, Any], in_repeat: bool) -> Iterator[tuple[Mapping[str, Any], bool]]:
        yield node, in_repeat
        inner = in_repeat or node.get("repeat") is not None
        template = node.get("template")
        for child in template if isinstance(template, list) else []:
            if isinstance(child, dict):
                yield from nodes(child, inner)

    for node, outer_repeat in nodes(raw, False):
        inner = outer_repeat or node.get("repeat") is not None
        texts: list[tuple[str, bool, bool, bool]] = []  # text, split, optional, in_repeat
        template = node.get("template")
        for item in [template] if isinstance(template, str) else template or []:
            if isinstance(item, str):
                texts.append((item, True, False, inner))
        if isinstance(node.get("recover"), str):
            texts.append((node["recover"], True, False, inner))
        if isinstance(node.get("when"), str):
            texts.append((node["when"], False, True, inner))
        if isinstance(node.get("repeat"), str):
            texts.append((node["repeat"], False, False, outer_repeat))
        for text, split, optional, repeat_scope in texts:
            words = split_words(text) if split else [text]
            for ref in references(words):
                yield ref, optional, repeat_scope
    artifacts = raw.get("artifacts")
    for spec in artifacts.values() if isinstance(artifacts, dict) else []:
        path = spec.get("path") if isinstance(spec, dict) else spec
        if isinstance(path, str):
            for ref in references([path]):
                yield ref, False, False


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parameters(raw: Mapping[str, Any]) -> list[Param]:
    """The tool parameters of a recipe: declared `args` first, then the other
    placeholder names in order of appearance. Raises BadInput for malformed `args`."""
    args = declared_args(raw)
    injected = _injected()
    uses: dict[str, _Use] = {}
    for ref, optional, in_repeat in _walk_refs(raw):
        name = ref.name
        if not name or name in injected or (in_repeat and name in _REPEAT_VARS):
            continue
        use = uses.setdefault(name, _Use())
        if ref.default is not None:
            if use.inline is None:
                use.inline = ref.default
        elif not optional and not getattr(ref, "optional", False):
            use.required = True
        expr = getattr(ref, "expr", "") or ""
        if expr.startswith(f"{name}.length") or expr.startswith(f"{name}["):
            use.array = True
    values: Mapping[str, Any] = _mapping(raw.get("values"))
    defaults: Mapping[str, Any] = _mapping(raw.get("defaults"))
    params = []
    for name in [*args, *(n for n in uses if n not in args)]:
        spec = args.get(name, {})
        use = uses.get(name, _Use())
        default: Any = None
        origin: str | None = None
        for source, mapping in (("values", values), ("defaults", defaults)):
            if name in mapping:
                default, origin = mapping[name], source
                break
        else:
            if spec.get("default") is not None:
                default, origin = spec["default"], "args"
            elif use.inline is not None:
                default, origin = use.inline, "inline"
        kind = spec.get("type") or ("array" if use.array else "string")
        params.append(
            Param(
                name=name,
                type=kind,
                default=default,
                default_from=origin,
                required=origin is None and use.required,
                choices=tuple(spec.get("values") or ()),
                description=spec.get("description"),
                declared=name in args,
            )
        )
    return params


# --- checking given values -------------------------------------------------------------


def coerce(param: Param, value: Any) -> Any:
    """`value` (command-line text or a JSON value) converted to the parameter's type;
    raises ValueError saying what was expected."""
    kind = param.type
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = value.strip() if isinstance(value, str) else None
        if text is not None and text.lstrip("+-").isdigit() and text.lstrip("+-").isascii():
            return int(text)
        raise ValueError(f"expected an integer, got {_show(value)}")
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            number: int | float = value
        elif isinstance(value, str):
            text = value.strip()
            try:
                number = int(text) if text.lstrip("+-").isdigit() else float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {_show(value)}") from None
        else:
            raise ValueError(f"expected a number, got {_show(value)}")
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {_show(value)}")
        return number
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"expected true or false, got {_show(value)}")
    if kind == "array":
        if isinstance(value, list):
            return value
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                import json

                try:
                    parsed = json.loads(value)
                except ValueError as exc:
                    raise ValueError(f"is not a valid JSON array: {exc}") from None
                if not isinstance(parsed, list):
                    raise ValueError("expected a JSON array")
                return parsed
            return [value]
        raise ValueError(f"expected an array, got {_show(value)}")
    if kind == "enum":
        text = value if isinstance(value, str) else None
        if text not in param.choices:
            raise ValueError(f"expected one of {', '.join(param.choices)}; got {_show(value)}")
        return text
    if kind == "path":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a path, got {_show(value)}")
        if "\0" in value:
            raise ValueError("a path cannot contain a NUL character")
        return os.path.expanduser(value)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool):
        return value  # rendered as its text, like any placeholder value
    raise ValueError(f"expected text, got {_show(value)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bind_values(
    tool_name: str,
    params: list[Param],
    given: Mapping[str, list[Any]],
    *,
    prefix: str = "--",
) -> dict[str, Any]:
    """The spawn values for a call: every given value checked and converted, `args`
    defaults filled in; BadInput (nothing spawned) for anything wrong. `given` maps a
    name (`-` accepted for `_`) to the values given for it, in order; an `array`
    parameter given several times collects them all."""
    out: dict[str, Any] = {}
    for key, items in given.items():
        param = find_param(tool_name, params, key, prefix=prefix)
        name = param.name
        if len(items) > 1 and param.type != "array":
            raise BadInput(
                f"{prefix}{name} is given {len(items)} times",
                hint="give it once (only array parameters collect repeated values)",
            )
        try:
            if len(items) > 1:
                out[name] = [coerce(Param(name), item) for item in items]
            else:
                out[name] = coerce(param, items[0])
        except ValueError as exc:
            raise BadInput(
                f"tool {tool_name}: {prefix}{name} ({param.describe_type()}): {exc}",
                hint=_example(param, prefix),
            ) from None
    for param in params:
        if param.name in out:
            continue
        if param.required:
            raise BadInput(
                f"tool {tool_name} needs {prefix}{param.name} ({param.describe_type()})",
                hint=f"{_example(param, prefix)}; `actors tools` lists every parameter",
            )
        if param.default_from == "args":
            out[param.name] = param.default
    return out


def find_param(tool_name: str, params: list[Param], key: str, *, prefix: str = "--") -> Param:
    """The parameter called `key` (`-` accepted for `_`), or BadInput saying which exist."""
    name = key.replace("-", "_")
    if name in _injected():
        raise BadInput(f"{prefix}{key}: {name} is set by the runtime and cannot be given")
    for param in params:
        if param.name == name:
            return param
    raise BadInput(
        f"tool {tool_name} has no parameter {prefix}{key}",
        hint=_params_hint(tool_name, params, name, prefix),
    )


def _params_hint(tool: str, params: list[Param], name: str, prefix: str) -> str:
    if not params:
        return f"{tool} takes no parameters"
    import difflib

    close = difflib.get_close_matches(name, [p.name for p in params], n=1)
    listed = ", ".join(f"{prefix}{p.name}" for p in params)
    return (f"did you mean {prefix}{close[0]}? " if close else "") + f"its parameters: {listed}"


def _example(param: Param, prefix: str) -> str:
    sample = {
        "int": "3",
        "number": "2.5",
        "bool": "true",
        "array": '\'["a","b"]\'',
        "path": "./file",
        "enum": param.choices[0] if param.choices else "X",
    }.get(param.type, "TEXT")
    return f"e.g. {prefix}{param.name} {sample}"


# --- finding tools ---------------------------------------------------------------------


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
    from runtime.compiler.library import compile_source, find_recipe, root_of

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
    from runtime.compiler.library import list_recipes

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


def invoke_tool(
    name: str,
    values: Mapping[str, Any],
    *,
    session: str | None = None,
    run_id: str | None = None,
    root: Any = None,
) -> dict[str, Any]:
    """Spawn the tool NAME with JSON values (a `tool:NAME` message body), after checking
    them against its parameters. Returns the run record (the run is always detached)."""
    from runtime.runs.spawn import SpawnRequest, spawn
    from runtime.store.layout import StateRoot

    state = root or StateRoot.from_env()
    tool = load_tool(name, state)
    bound = bind_values(name, tool.params, {k: [v] for k, v in values.items()}, prefix="")
    return spawn(
        SpawnRequest(recipe=name, values=bound, session=session, run_id=run_id), root=state
    )


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
    import json

    from runtime.compiler.library import MAX_RECIPE_BYTES, recipe_problem, recipe_roots
    from runtime.store.files import ensure_dir, write_bytes_atomic

    if not is_valid_id(name) or name.endswith(".json"):
        raise BadInput(
            f"invalid tool name {name!r}", hint="use letters, digits and '._-' (e.g. git-log)"
        )
    if len(data) > MAX_RECIPE_BYTES:
        raise BadInput(f"{label}: the recipe is {len(data)} bytes; the limit is {MAX_RECIPE_BYTES}")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
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
            hint="pass --update to replace it (nothing was written)",
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
            hint="pass --update to replace it (nothing was written)",
        ) from None
    finally:
        stage.unlink(missing_ok=True)
    return target, False


# --- foreground output -----------------------------------------------------------------


def bounded_tail(
    path: Path | None, *, max_lines: int = OUTPUT_MAX_LINES, max_bytes: int = OUTPUT_MAX_BYTES
) -> tuple[str, bool, int]:
    """`(text, cut, total_bytes)`: the end of a file, at most `max_lines` lines and
    `max_bytes` bytes (whole lines only when it was cut)."""
    from runtime.store.files import read_bytes

    if path is None:
        return "", False, 0
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return "", False, 0
    start = max(0, size - max_bytes)
    data = read_bytes(path, offset=start, limit=size - start)
    cut = start > 0
    if cut:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    lines = data.splitlines(keepends=True)
    if len(lines) > max_lines:
        lines, cut = lines[-max_lines:], True
    return b"".join(lines).decode("utf-8", errors="replace"), cut, size


__all__ = [
    "ARG_TYPES",
    "Param",
    "Tool",
    "bind_values",
    "bounded_tail",
    "coerce",
    "declared_args",
    "find_param",
    "invoke_tool",
    "load_tool",
    "parameters",
    "register_tool",
    "tool_entries",
]

"""A recipe's parameters: derived from the raw recipe, and given values checked against them.

Every recipe's parameters are derived from two sources, read from the raw recipe so that they do not
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

Values given for a recipe or tool (`actors run TOOL --key value`, or a `tool:NAME` message body)
are checked and converted here, before anything is spawned: an unknown name, a badly
typed value or a missing required parameter is a `BadInput` (exit 2, nothing written).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.compiler.placeholders import INJECTED, REPEAT_VARS, references, split_words
from runtime.compiler.values import ARG_TYPES, args_as_mapping, convert
from runtime.core.errors import BadInput
from runtime.core.ids import is_valid_name

_ARG_KEYS = {"type", "values", "default", "description"}


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
        if name in INJECTED:
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
            try:
                normalized["default"] = convert(kind, default, choices=tuple(choices or ()))
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
    uses: dict[str, _Use] = {}
    for ref, optional, in_repeat in _walk_refs(raw):
        name = ref.name
        if not name or name in INJECTED or (in_repeat and name in REPEAT_VARS):
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


def coerce(param: Param, value: Any, cwd: str | None = None) -> Any:
    """`value` (command-line text or a JSON value) converted to the parameter's type by the
    one converter; raises ValueError saying what was expected."""
    return convert(param.type, value, choices=param.choices, cwd=cwd)


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
    cwd = os.getcwd()
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
                out[name] = [coerce(Param(name), item, cwd) for item in items]
            else:
                out[name] = coerce(param, items[0], cwd)
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
    if name in INJECTED:
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

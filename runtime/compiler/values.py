"""Typed recipe parameters (`args`): values given at spawn are checked and converted.

A value from the command line is text; a declared type turns it into what the template
and the run expect (`n:int` gets 5, not "5"; `files:array` accepts a JSON array or a
comma list), and a value that does not fit is refused before anything is written, with
the parameter's name and what would fit.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any

from runtime.core.bounded_json import INPUT_DEPTH, MAX_INPUT_BYTES, Undecodable, decode
from runtime.core.errors import BadInput

ARG_TYPES = ("string", "int", "number", "bool", "array", "enum", "path")
TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0")


def args_as_mapping(raw: Any) -> Any:
    """`args` as pi-actors writes them (`["n:int", "mode:enum(a,b)"]`, or the comma string
    "n:int, mode:enum(a,b)", whose commas inside (...) are choices) as the object form
    `{name: {type, values}}`; an object (or anything else) is returned as it is, for the
    caller to check. Raises ValueError naming the bad list item."""
    if isinstance(raw, str):
        raw = [item.strip() for item in re.split(r",(?![^()]*\))", raw) if item.strip()]
    if not isinstance(raw, list):
        return raw
    parsed: dict[str, Any] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, str):
            raise ValueError(f"args[{index}]: {item!r} is not a 'name:type' declaration")
        name, _, kind = item.partition(":")
        kind = kind.strip() or "string"
        choices = None
        if kind.startswith("enum(") and kind.endswith(")"):
            choices = [c.strip() for c in kind[5:-1].split(",") if c.strip()]
            kind = "enum"
        parsed[name.strip()] = {"type": kind, "values": choices}
    return parsed


def coerce_value(name: str, spec: Mapping[str, Any], value: Any, cwd: str) -> Any:
    """A `-v name=value` (or API) value converted to its declared type; BadInput naming
    the parameter and what would fit."""
    kind = spec.get("type") or "string"
    choices = tuple(spec.get("values") or ())
    try:
        return convert(kind, value, choices=choices, cwd=cwd)
    except ValueError:
        pass
    wanted = {
        "int": "a whole number",
        "number": "a number",
        "bool": "true or false",
        "array": 'a JSON array (\'["a","b"]\') or a comma list',
        "enum": "one of " + ", ".join(choices),
        "path": "a file path",
    }.get(kind, "text")
    raise BadInput(f"value {name}={value!r} is not {wanted}", hint=f"{name} is declared {kind}")


def convert(kind: str, value: Any, *, choices: tuple[str, ...] = (), cwd: str | None = None) -> Any:
    """The one converter: command-line text or a JSON value to a parameter's type.

    `spawn -v`, `actors run --key`, a `tool:` message body, MCP values and `args`
    defaults all come through here, so one input means one thing everywhere. Raises
    ValueError saying what was expected.
    """
    if kind not in _CONVERTERS:
        raise ValueError(f"unknown type {kind!r} (one of {', '.join(ARG_TYPES)})")
    return _CONVERTERS[kind](value, choices, cwd)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _to_int(value: Any, _choices: tuple[str, ...], _cwd: str | None) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip() if isinstance(value, str) else None
    if text is not None and text.lstrip("+-").isdigit() and text.lstrip("+-").isascii():
        return int(text)
    raise ValueError(f"expected an integer, got {_show(value)}")


def _to_number(value: Any, _choices: tuple[str, ...], _cwd: str | None) -> int | float:
    number: int | float
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value
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


def _to_bool(value: Any, _choices: tuple[str, ...], _cwd: str | None) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
        return value.strip().lower() in TRUE
    raise ValueError(f"expected true or false, got {_show(value)}")


def _to_array(value: Any, _choices: tuple[str, ...], _cwd: str | None) -> list[Any]:
    """A JSON array as it is; text starting with `[` parsed as one; other text a comma
    list (`api,ui` is two items; a value holding a comma needs the JSON form)."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an array, got {_show(value)}")
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = decode(text, max_bytes=MAX_INPUT_BYTES, max_depth=INPUT_DEPTH)
        except Undecodable as exc:
            raise ValueError(f"is not a valid JSON array: {exc}") from None
        if not isinstance(parsed, list):
            raise ValueError("expected a JSON array")
        return parsed
    return [item.strip() for item in text.split(",") if item.strip()]


def _to_enum(value: Any, choices: tuple[str, ...], _cwd: str | None) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(f"expected one of {', '.join(choices)}; got {_show(value)}")


def _to_path(value: Any, _choices: tuple[str, ...], cwd: str | None) -> str:
    """`~` expanded; given the caller's directory, a relative path is made absolute
    against it, so the run finds the same file whatever its own working directory."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a path, got {_show(value)}")
    if "\0" in value:
        raise ValueError("a path cannot contain a NUL character")
    path = os.path.expanduser(value)
    if cwd is None:
        return path
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def _to_string(value: Any, _choices: tuple[str, ...], _cwd: str | None) -> Any:
    if isinstance(value, str | int | float | bool):
        return value  # a scalar renders as its text, like any placeholder value
    raise ValueError(f"expected text, got {_show(value)}")


_CONVERTERS = {
    "string": _to_string,
    "int": _to_int,
    "number": _to_number,
    "bool": _to_bool,
    "array": _to_array,
    "enum": _to_enum,
    "path": _to_path,
}


def apply_args(
    args: Mapping[str, Mapping[str, Any]], values: dict[str, Any], cwd: str
) -> dict[str, Any]:
    """Declared defaults filled in, every declared value converted to its type."""
    out = dict(values)
    for name, spec in args.items():
        if name not in out and spec.get("default") is not None:
            out[name] = spec["default"]
        if name in out:
            out[name] = coerce_value(name, spec, out[name], cwd)
    return out

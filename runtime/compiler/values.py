"""Typed recipe parameters (`args`): values given at spawn are checked and converted.

A value from the command line is text; a declared type turns it into what the template
and the run expect (`n:int` gets 5, not "5"; `files:array` accepts a JSON array or a
comma list), and a value that does not fit is refused before anything is written, with
the parameter's name and what would fit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from runtime.core.errors import BadInput

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


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
    kind = spec.get("type") or "string"
    try:
        return _coerce(kind, spec, value, cwd)
    except (ValueError, TypeError):
        pass
    wanted = {
        "int": "a whole number",
        "number": "a number",
        "bool": "true or false",
        "array": 'a JSON array (\'["a","b"]\') or a comma list',
        "enum": "one of " + ", ".join(spec.get("values") or []),
        "path": "a file path",
        "string": "text",
    }[kind]
    raise BadInput(f"value {name}={value!r} is not {wanted}", hint=f"{name} is declared {kind}")


def _coerce(kind: str, spec: Mapping[str, Any], value: Any, cwd: str) -> Any:
    text = value if isinstance(value, str) else None
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError
        return int(text.strip()) if text is not None else int(value)
    if kind == "number":
        if isinstance(value, bool):
            raise ValueError
        return float(text) if text is not None else float(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError
    if kind == "array":
        if isinstance(value, list):
            return value
        if text is None:
            raise ValueError
        stripped = text.strip()
        if stripped.startswith("["):
            parsed = json.loads(stripped)
            if not isinstance(parsed, list):
                raise ValueError
            return parsed
        return [item.strip() for item in stripped.split(",") if item.strip()]
    if kind == "enum":
        if str(value) not in (spec.get("values") or []):
            raise ValueError
        return str(value)
    if kind == "path":
        if not isinstance(value, str) or not value or "\0" in value:
            raise ValueError
        path = os.path.expanduser(value)
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    return value if isinstance(value, str) else json.dumps(value)


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

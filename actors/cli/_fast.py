"""The hand-parsed path: `actors --version` and the plain calls of the hot verbs
(actors.cli.commands names them and their options), without click.

An agent may call these hundreds of times, and importing click costs more than the
work itself. Their arguments are simple, so this parses them by hand: known flags, known
options (`--opt value` or `--opt=value`), `--` and positionals. Anything else (help, an
unknown or misspelt option, a bad choice, too many arguments) is not handled here: `run`
returns False and the click command parses the same argv, so the two can never disagree
on what is valid and click's error messages stay the only ones.

This module only parses and dispatches: each verb's body lives with its concern
(actors.cli._messaging, _lifecycle, _views), and its click command calls the same one.
"""

from __future__ import annotations

import sys
from typing import Any

from actors.cli.commands import FAST, FAST_SUBCOMMANDS, FastSpec


def run(args: list[str]) -> bool:
    """Run `args` when they are `--version` or a plain call of a hand-parsed verb; False
    to let click handle them."""
    if args == ["--version"]:
        from actors._version import __version__

        sys.stdout.write(f"actors, version {__version__}\n")  # click's version_option text
        sys.stdout.flush()
        return True
    if args in (["--help"], ["-h"]) and _columns() >= HELP_COLUMNS:
        from actors.cli._help import TOP_HELP

        sys.stdout.write(TOP_HELP)
        sys.stdout.flush()
        return True
    spec, rest = (FAST.get(args[0]), args[1:]) if args else (None, [])
    if spec is None and len(args) >= 2:
        spec, rest = FAST_SUBCOMMANDS.get((args[0], args[1])), args[2:]
    if spec is None:
        return False
    parsed = _parse(spec, rest)
    if parsed is None:
        return False
    for key in spec.seconds:
        if parsed[key] is None:
            continue  # absent, with no default: None, as click passes it
        value = _seconds(parsed[key])
        if value is None:
            return False
        parsed[key] = value
    _body(spec.body)(**parsed)
    return True


def _body(target: str) -> Any:
    import importlib

    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


HELP_COLUMNS = 80
"""From this terminal width up click renders the help 78 columns wide (its max_width),
the width actors.cli._help holds; a narrower terminal gets click's own rendering."""


def _columns() -> int:
    """The terminal's width as click finds it (shutil.get_terminal_size: $COLUMNS, else
    stdout's terminal, else 80), without importing shutil."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _parse(spec: FastSpec, args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of `spec.body` for `args`, or None: not a plain call."""
    values: dict[str, Any] = {name: False for name in spec.flags.values()}
    values.update({name: [] if name in spec.multiple else None for name in spec.options.values()})
    values.update(spec.defaults)
    positionals: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            positionals.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, eq, inline = arg.partition("=")
        if eq and not name.startswith("--"):
            return None  # click reads `-t=x` as the value "=x": leave such spellings to it
        if name in spec.flags and not eq:
            values[spec.flags[name]] = True
        elif name in spec.options:
            value = inline if eq else next(rest, None)
            if value is None:
                return None
            key = spec.options[name]
            if key in spec.multiple:
                values[key].append(value)
            else:
                values[key] = value
        else:
            return None  # help, an unknown option, a short option cluster: click's job
    if not spec.required <= len(positionals) <= len(spec.positionals):
        return None
    for key, allowed in spec.choices.items():
        if values[key] is not None and values[key] not in allowed:
            return None
    values.update(dict.fromkeys(spec.positionals))
    values.update(zip(spec.positionals, positionals, strict=False))
    return values


def _seconds(text: str) -> float | None:
    """A seconds option as actors.cli._options.SECONDS takes it; None: let click report
    a bad value."""
    from runtime.core.config import parse_seconds

    return parse_seconds(text)

"""`actors message` and `actors emit` without click.

An agent may call these hundreds of times, and importing click costs more than the
work itself. Their arguments are simple, so this parses them by hand: known flags, known
options (`--opt value` or `--opt=value`), `--` and positionals. Anything else (help, an
unknown or misspelt option, a bad choice, too many arguments) is not handled here: `run`
returns None and the click command parses the same argv, so the two can never disagree
on what is valid and click's error messages stay the only ones.

The command bodies live here too (click's commands call them), so both paths do the
same thing.
"""

from __future__ import annotations

import sys
from typing import Any

_MESSAGE = {
    "positionals": ("address", "type", "body"),
    "required": 2,
    "flags": {
        "--json": "body_json",
        "--force": "force",
        "--no-fsync": "no_fsync",
        "--print-json": "as_json",
    },
    "options": {"--summary": "summary", "--reply-to": "reply_to", "--session": "session"},
    "choices": {},
}

_EMIT = {
    "positionals": ("type", "body"),
    "required": 1,
    "flags": {"--json": "body_json", "--print": "show"},
    "options": {"--to": "to", "--summary": "summary", "--level": "level", "--deliver": "delivery"},
    "choices": {"level": ("info", "warning", "error"), "delivery": ("log", "notify", "followup")},
}


def _parse(spec: dict[str, Any], args: list[str]) -> dict[str, Any] | None:
    values: dict[str, Any] = {name: False for name in spec["flags"].values()}
    values.update({name: None for name in spec["options"].values()})
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
        if name in spec["flags"] and not eq:
            values[spec["flags"][name]] = True
        elif name in spec["options"]:
            value = inline if eq else next(rest, None)
            if value is None:
                return None
            values[spec["options"][name]] = value
        else:
            return None  # help, an unknown option, a short option cluster: click's job
    if not spec["required"] <= len(positionals) <= len(spec["positionals"]):
        return None
    for key, allowed in spec["choices"].items():
        if values[key] is not None and values[key] not in allowed:
            return None
    values.update(zip(spec["positionals"], positionals, strict=False))
    return values


def message(
    address: str,
    type: str,
    body: str | None = None,
    *,
    body_json: bool = False,
    summary: str | None = None,
    reply_to: str | None = None,
    force: bool = False,
    session: str | None = None,
    no_fsync: bool = False,
    as_json: bool = False,
) -> None:
    """The body of `actors message`."""
    from runtime.envelope import parse_body
    from runtime.messaging import send
    from runtime.ownership import current_principal
    from runtime.paths import StateRoot

    root = StateRoot.from_env()
    outcome = send(
        root,
        address,
        type,
        parse_body(body, as_json=body_json),
        current_principal(root, session),
        force=force,
        summary=summary,
        reply_to=reply_to,
        fsync=not no_fsync,
    )
    _print(outcome, as_json=as_json)


def emit(
    type: str,
    body: str | None = None,
    *,
    body_json: bool = False,
    to: str | None = None,
    summary: str | None = None,
    level: str | None = None,
    show: bool = False,
    delivery: str | None = None,
) -> None:
    """The body of `actors emit`."""
    from runtime.envelope import parse_body
    from runtime.messaging import emit as emit_message
    from runtime.ownership import current_principal
    from runtime.paths import StateRoot

    root = StateRoot.from_env()
    outcome = emit_message(
        root,
        type,
        parse_body(body, as_json=body_json),
        current_principal(root),
        to=to or "coordinator",
        summary=summary,
        level=level or "info",
        delivery=delivery or "log",
    )
    if show:
        _print(outcome, as_json=False)


def _print(outcome: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        import json

        text = json.dumps(outcome, indent=2, ensure_ascii=False, default=str)
    else:
        text = " ".join(f"{k}={v}" for k, v in outcome.items())
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run(args: list[str]) -> bool:
    """Run `args` when they are a plain `message` or `emit` call; False to let click."""
    if not args or args[0] not in ("message", "emit"):
        return False
    command = message if args[0] == "message" else emit
    parsed = _parse(_MESSAGE if args[0] == "message" else _EMIT, args[1:])
    if parsed is None:
        return False
    command(**parsed)
    return True

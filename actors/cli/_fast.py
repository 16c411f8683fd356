"""`actors message`, `emit`, `spawn`, `kill`, `cancel`, `ls` and `status` without click.

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
from collections.abc import Callable
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


_STOP = {
    "positionals": ("run",),
    "required": 1,
    "flags": {"--force": "force", "--json": "as_json"},
    "options": {"--session": "session"},
    "choices": {},
}
_CANCEL = {**_STOP, "options": {"--session": "session", "--grace": "grace"}}

_SPAWN = {
    "positionals": ("recipe",),
    "required": 0,
    "flags": {"--json": "as_json"},
    "options": {
        "--recipe": "recipe_file",
        "-t": "template",
        "--template": "template",
        "--as": "as_",
        "--session": "session",
        "-v": "values",
        "--value": "values",
        "--secret": "secrets",
    },
    "multiple": ("values", "secrets"),
    "choices": {},
}
"""`--wait` is not here: it draws a progress line, which is click's command's job."""

_LS = {
    "positionals": (),
    "required": 0,
    "flags": {"--mine": "mine", "--tree": "tree", "--json": "as_json"},
    "options": {"--status": "statuses", "--session": "session"},
    "multiple": ("statuses",),
    "choices": {},
}

_STATUS = {
    "positionals": ("run",),
    "required": 0,
    "flags": {"--line": "line", "--json": "as_json"},
    "options": {"--session": "session"},
    "choices": {},
}


def _parse(spec: dict[str, Any], args: list[str]) -> dict[str, Any] | None:
    multiple = spec.get("multiple", ())
    values: dict[str, Any] = {name: False for name in spec["flags"].values()}
    values.update({name: [] if name in multiple else None for name in spec["options"].values()})
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
        if name in spec["flags"] and not eq:
            values[spec["flags"][name]] = True
        elif name in spec["options"]:
            value = inline if eq else next(rest, None)
            if value is None:
                return None
            key = spec["options"][name]
            if key in multiple:
                values[key].append(value)
            else:
                values[key] = value
        else:
            return None  # help, an unknown option, a short option cluster: click's job
    if not spec["required"] <= len(positionals) <= len(spec["positionals"]):
        return None
    for key, allowed in spec["choices"].items():
        if values[key] is not None and values[key] not in allowed:
            return None
    values.update(dict.fromkeys(spec["positionals"]))
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
    from runtime.messaging.envelope import parse_body
    from runtime.routing.router import send
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot

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
    from runtime.messaging.envelope import parse_body
    from runtime.routing.in_run import emit as emit_message
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot

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


def stop(
    run: str,
    *,
    kill: bool,
    force: bool = False,
    session: str | None = None,
    as_json: bool = False,
    grace: float = 5.0,
) -> None:
    """The body of `actors kill` (SIGKILL now) and `actors cancel` (SIGTERM, grace, SIGKILL)."""
    from actors.cli._format import emit_json, summary_line
    from runtime.runs.control import cancel, kill as kill_run
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot, parse_run_ref

    root = StateRoot.from_env()
    principal = current_principal(root, session)
    if kill:
        summary = kill_run(root, parse_run_ref(run), principal, force=force)
    else:
        summary = cancel(root, parse_run_ref(run), principal, force=force, grace=grace)
    if as_json:
        emit_json(summary)
    else:
        sys.stdout.write(summary_line(summary) + "\n")
        sys.stdout.flush()


def parse_values(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`-v KEY=VALUE` pairs as a mapping."""
    from runtime.core.errors import BadInput

    values: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadInput(f"-v {pair!r} is not KEY=VALUE", hint="e.g. -v source=~/Music")
        values[name] = value
    return values


def start_run(
    recipe: str | None = None,
    *,
    recipe_file: str | None = None,
    template: str | None = None,
    as_: str | None = None,
    values: list[str] | tuple[str, ...] = (),
    secrets: list[str] | tuple[str, ...] = (),
    session: str | None = None,
) -> dict[str, Any]:
    """Start the detached run `actors spawn` names; returns its record."""
    from runtime.core.errors import BadInput
    from runtime.runs.spawn import SpawnRequest, spawn as spawn_run

    if recipe and recipe_file:
        raise BadInput("give the recipe once: either RECIPE or --recipe FILE")
    return spawn_run(
        SpawnRequest(
            recipe=recipe or recipe_file,
            template=template,
            run_id=as_,
            values=parse_values(values),
            session=session,
            secret_names=list(secrets),
        )
    )


def spawn(*, as_json: bool = False, **request: Any) -> None:
    """The body of `actors spawn` without `--wait`: start the run, print its address."""
    from actors.cli._format import print_started

    record = start_run(**request)
    print_started(record, as_json, run_instance_id=record["run_instance_id"])


def _print(outcome: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        import json

        text = json.dumps(outcome, indent=2, ensure_ascii=False, default=str)
    else:
        text = " ".join(f"{k}={v}" for k, v in outcome.items())
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _ls(**parsed: Any) -> None:
    from actors.cli._views import list_view

    list_view(**parsed)


def _status(**parsed: Any) -> None:
    from actors.cli._views import status_view

    status_view(**parsed)


_PLAIN: dict[str, tuple[dict[str, Any], Callable[..., None]]] = {
    "message": (_MESSAGE, message),
    "emit": (_EMIT, emit),
    "spawn": (_SPAWN, spawn),
    "ls": (_LS, _ls),
    "status": (_STATUS, _status),
}


def run(args: list[str]) -> bool:
    """Run `args` when they are a plain `message`, `emit`, `spawn`, `kill`, `cancel`, `ls`
    or `status` call; False to let click handle them."""
    if not args:
        return False
    command, rest = args[0], args[1:]
    if command in ("kill", "cancel"):
        parsed = _parse(_CANCEL if command == "cancel" else _STOP, rest)
        if parsed is not None and command == "cancel":
            grace = _seconds(parsed.pop("grace"))
            parsed = None if grace is None else {**parsed, "grace": grace}
        if parsed is None:
            return False
        stop(**parsed, kill=command == "kill")
        return True
    if command not in _PLAIN:
        return False
    spec, body = _PLAIN[command]
    parsed = _parse(spec, rest)
    if parsed is None:
        return False
    body(**parsed)
    return True


def _seconds(text: str | None) -> float | None:
    """`--grace` as click's FLOAT would take it (its default when absent); None: let click
    report a bad value."""
    if text is None:
        return 5.0
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # NaN is click's to refuse, not ours

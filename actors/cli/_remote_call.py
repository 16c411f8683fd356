"""A verb with a `run:<host>/<id>` address, read by the verb's own click command before
it goes to the host: which options were given is click's answer, never a guess from the
raw text (a message body or summary of `--force` is a value, not the option)."""

from __future__ import annotations

import importlib

import click

from actors.cli.commands import COMMANDS
from runtime.core.errors import BadInput
from runtime.hosts.remote import RemoteCall, RemoteMessage


def read_call(args: list[str]) -> RemoteCall | RemoteMessage:
    """`args` (verb first) as its click command parses them: its --force and --session,
    and its arguments without the --session option (the host gets its own session)."""
    verb, rest = args[0], args[1:]
    module_name, attr = COMMANDS[verb].split(":")
    command = getattr(importlib.import_module(module_name), attr)
    assert isinstance(command, click.Command)
    try:
        params = command.make_context(verb, list(rest), resilient_parsing=True).params
    except click.UsageError as err:
        raise BadInput(
            f"actors {verb}: {err.format_message()}", hint=f"see `actors {verb} --help`"
        ) from None
    if verb == "message":
        return _message(params)
    takes_value = {
        opt
        for param in command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for opt in param.opts
    }
    return RemoteCall(
        verb=verb,
        args=_without_session(rest, takes_value),
        force=bool(params.get("force")),
        session=params.get("session"),
    )


def _without_session(args: list[str], takes_value: set[str]) -> list[str]:
    """`args` less their --session options: only options are looked at (up to `--`, and
    never an option's value), so a value or body that reads `--session` stays."""
    kept: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return kept + args[index:]
        if arg == "--session" or arg.startswith("--session="):
            index += 1 if "=" in arg else 2
            continue
        kept.append(arg)
        if arg in takes_value and index + 1 < len(args):
            kept.append(args[index + 1])
            index += 1
        index += 1
    return kept


def _message(params: dict[str, object]) -> RemoteMessage:
    """`actors message run:<host>/<id> TYPE [BODY]` as click parsed it; the body read by
    the one converter local messages use."""
    from actors.cli._messaging import _body

    address, kind = params.get("address"), params.get("type")
    if not isinstance(address, str) or not isinstance(kind, str):
        raise BadInput("actors message: give ADDRESS and TYPE", hint="see `actors message --help`")
    body = params.get("body")
    as_json = bool(params.get("as_json"))
    session = params.get("session")
    summary, reply_to = params.get("summary"), params.get("reply_to")
    return RemoteMessage(
        address=address,
        type=kind,
        body=_body(body if isinstance(body, str) else None, bool(params.get("body_json")), as_json),
        summary=summary if isinstance(summary, str) else None,
        reply_to=reply_to if isinstance(reply_to, str) else None,
        force=bool(params.get("force")),
        session=session if isinstance(session, str) else None,
        as_json=as_json,
    )

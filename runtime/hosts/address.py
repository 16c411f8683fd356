"""Which argument of a verb is a run's address, and whether it is a remote run's: what
actors.cli reads on every call of a run verb to tell a remote run from a local one, so it
imports nothing."""

from __future__ import annotations

from collections.abc import Sequence

MESSAGE_VALUE_OPTIONS = frozenset({"--summary", "--reply-to", "--session"})
"""`actors message`'s options that take a value (actors.cli.commands.MESSAGE_ARGS,
repeated here so this module imports nothing; a test holds them equal)."""


def is_remote(address: str) -> bool:
    """Whether `address` names a run on a host (`run:<host>/<id>`), before its parts are
    checked (runtime.hosts.remote.remote_ref validates them): the one spelling of it."""
    return address.startswith("run:") and "/" in address


def message_address(args: Sequence[str]) -> int | None:
    """The index of `actors message`'s address among its arguments: the first that is
    neither an option nor an option's value (None when there is none)."""
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return index + 1 if index + 1 < len(args) else None
        if arg in MESSAGE_VALUE_OPTIONS:
            index += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return index
        index += 1
    return None

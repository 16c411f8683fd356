"""A remote run's address, `run:<host>/<id>`: whether an argument is one and which
argument of a verb it is (what actors.cli reads on every call of a run verb to tell a
remote run from a local one, so it imports nothing at its top), and its checked parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

MESSAGE_VALUE_OPTIONS = frozenset({"--summary", "--reply-to", "--session"})
"""`actors message`'s options that take a value (actors.cli.commands.MESSAGE_ARGS,
repeated here so this module imports nothing; a test holds them equal)."""


def is_remote(address: str) -> bool:
    """Whether `address` names a run on a host (`run:<host>/<id>`), before its parts are
    checked (remote_ref validates them): the one spelling of it."""
    return address.startswith("run:") and "/" in address


class RemoteRef(NamedTuple):
    """A run on a host: the host's name here and the run's id there."""

    host: str
    run: str

    def __str__(self) -> str:
        return f"run:{self.host}/{self.run}"


def remote_ref(text: str) -> RemoteRef | None:
    """`run:<host>/<id>` -> its parts (validated); None for any other address."""
    from runtime.core.errors import BadInput
    from runtime.core.ids import is_valid_id

    if not is_remote(text):
        return None
    host, _, run = text[4:].partition("/")
    if not is_valid_id(host) or not is_valid_id(run):
        raise BadInput(
            f"invalid address {text[:80]!r}",
            hint="a run is run:ID, a remote run run:HOST/ID (a host from `actors host ls`)",
        )
    return RemoteRef(host, run)


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

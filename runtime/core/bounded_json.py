"""The one decoder of JSON that someone else wrote: bounded in size, depth and value.

Runs write their own state files, recipe folders hold files anyone could have put there,
and hook callers, MCP and HTTP clients send what they like. `json.loads` trusts its
input: `"[" * 100000` raises RecursionError (not ValueError) and breaks every caller
that catches only ValueError; a value nested a few hundred deep parses, then breaks
whatever walks it recursively afterwards (secret masking, the indenting encoder,
pydantic); `NaN` and `1e999` are not JSON that anything else can read back; a `"\\ud800"`
escape is a str that cannot be written as UTF-8. `decode` refuses each of these with an
`Undecodable` (a ValueError) saying what is wrong, so a caller names the file or the
input once: `StateDamaged` for a state file (runtime.store.reads), `BadInput` for input
(`decode_input`).

The depth is checked without recursion, and only when it could matter: a text with no
more brackets than the limit cannot nest deeper than it, so the usual small record costs
two `count`s; anything else is walked level by level after the C decoder has built it.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100
"""How deep the arrays and objects of a state file may nest (a journal line, run.json):
the records actors writes wrap what it accepted (`INPUT_DEPTH`) in a few levels."""
INPUT_DEPTH = 64
"""How deep accepted input may nest (a message body, a `-v` value, a hook payload, a
request body), so that every record that embeds it stays within `MAX_DEPTH`."""
MAX_INPUT_BYTES = 16 * 1024 * 1024
"""The most any one piece of input (hook stdin, a request body) is read or parsed."""


class Undecodable(ValueError):
    """The text is not bounded, finite, UTF-8 JSON; `str()` says why in a few words."""


class TooDeep(Undecodable):
    """Its arrays and objects nest deeper than the limit."""


def _no_constant(name: str) -> Any:
    raise Undecodable(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if number - number != 0.0:  # inf - inf is nan; a finite number minus itself is 0
        raise Undecodable(f"{text[:40]} is out of range for a number")
    return number


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def decode(data: bytes | str, *, max_bytes: int | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """The value of one JSON text; Undecodable when it is larger than `max_bytes`, not
    UTF-8, not JSON, nests deeper than `max_depth`, or holds NaN, Infinity, a number out
    of float range or an unpaired surrogate escape."""
    if isinstance(data, str):
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:
            raise Undecodable("it is not UTF-8 text") from None
    else:
        raw = data
    if max_bytes is not None and len(raw) > max_bytes:
        raise Undecodable(f"it is {len(raw)} bytes, more than the {max_bytes} allowed")
    try:
        text = raw.decode("utf-8") if isinstance(data, bytes) else data
        value = _DECODER.decode(text)
    except Undecodable:
        raise
    except UnicodeDecodeError as exc:
        raise Undecodable(f"it is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise Undecodable(f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # an integer of more digits than int() takes
        raise Undecodable(str(exc)) from None
    except RecursionError:
        raise TooDeep(f"it is nested more than {max_depth} levels deep") from None
    except MemoryError:
        raise Undecodable("it is too large to decode") from None
    if raw.count(b"[") + raw.count(b"{") > max_depth and too_deep(value, max_depth):
        raise TooDeep(f"it is nested more than {max_depth} levels deep")
    if b"\\ud" in raw or b"\\uD" in raw:  # escapes of surrogates: paired, or not
        try:
            _ENCODE(value).encode("utf-8")
        except UnicodeEncodeError:
            raise Undecodable("it holds an unpaired surrogate escape (not UTF-8 text)") from None
    return value


def decode_input(
    data: bytes | str,
    what: str,
    *,
    max_bytes: int | None = MAX_INPUT_BYTES,
    max_depth: int = INPUT_DEPTH,
) -> Any:
    """`decode` for input a caller sent: BadInput naming `what` when it is refused."""
    try:
        return decode(data, max_bytes=max_bytes, max_depth=max_depth)
    except Undecodable as exc:
        from runtime.core.errors import BadInput

        raise BadInput(f"{what} is not usable JSON: {exc}") from None


def too_deep(value: Any, limit: int) -> bool:
    """Whether arrays and objects (lists, tuples, dicts) nest deeper than `limit`.
    Iterative, a level at a time (no recursion); a structure that contains itself counts
    as infinitely deep."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item
            below += [child for child in values if isinstance(child, _CONTAINERS)]
        level = below
    return False


_CONTAINERS = (dict, list, tuple)

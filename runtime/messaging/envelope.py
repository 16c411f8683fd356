"""Typed envelopes: one JSON object per message, validated without pydantic.

The rules live here as plain functions so the CLI's `message` / `emit` paths stay fast
(importing pydantic would triple their start-up time); any typed model layered on top
must call these same functions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from runtime.core.bounded_json import INPUT_DEPTH, TooDeep, Undecodable, decode, too_deep
from runtime.core.errors import BadInput
from runtime.core.ids import new_id, now_iso
from runtime.messaging.addresses import parse_address
from runtime.store.appends import compact_json

MAX_ENVELOPE_BYTES = 64 * 1024
"""Envelope cap (documented): larger payloads go to a file whose path is the body."""
MAX_BODY_DEPTH = INPUT_DEPTH
"""Nesting cap for bodies (arrays and objects): below the depth every reader of a
journal accepts (runtime.core.bounded_json), so every stored envelope can be encoded and
parsed again by any reader."""
MAX_SUMMARY_CHARS = 500
LEVELS = ("info", "warning", "error")
MODES = ("immediate", "next-message", "next-tool-call", "on-idle", "manual")
_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,127}")

if TYPE_CHECKING:  # type-only: building the TypedDict costs time on every `message`
    Envelope = TypedDict(
        "Envelope",
        {
            "id": str,
            "type": str,
            "to": str,
            "session": NotRequired[str | None],
            "from": str,
            "summary": str,
            "level": str,
            "ts": str,
            "body": Any,
            "mode": NotRequired[str],
            "reason": NotRequired[str],
            "priority": NotRequired[int],
            "deadline": NotRequired[str],
            "idempotency_key": NotRequired[str],
            "reply_to": NotRequired[str],
            "forced": NotRequired[bool],
            "run": NotRequired[str],
            "run_instance_id": NotRequired[str],
            "delivery": NotRequired[str],
            "received_at": NotRequired[str],
        },
    )
    """One message, as `build_envelope` assembles it and every journal stores it. `body` is
    the sender's arbitrary JSON. The optional keys: `session` (a follow-up's owner), the
    routing hints `make_envelope` takes, `forced` (a `control.stop` / `control.kill`
    only `--force` let through: its owner is told when the run ends so), `run` / `run_instance_id` (sent from inside a run),
    `delivery` (outbox lines) and `received_at` (room timeline lines). Functional syntax
    because `from` is a keyword."""


def check_type(value: str) -> str:
    if not _TYPE_RE.fullmatch(value):
        raise BadInput(
            f"invalid message type {value[:80]!r}",
            hint="use a dotted name like player.next or task.assign (letters, digits, ._:-)",
        )
    return value


def check_body(body: Any) -> None:
    """Refuse a body nested deeper than any reader could parse again."""
    if isinstance(body, (dict, list, tuple)) and too_deep(body, MAX_BODY_DEPTH):
        raise BadInput(
            f"message body is nested more than {MAX_BODY_DEPTH} levels deep",
            hint="flatten it, or write it to a file and send the path",
        )


def make_envelope(
    *,
    to: str,
    type: str,
    body: Any = None,
    sender: str,
    summary: str | None = None,
    level: str = "info",
    mode: str | None = None,
    reason: str | None = None,
    priority: int | None = None,
    deadline: str | None = None,
    idempotency_key: str | None = None,
    reply_to: str | None = None,
    extra: dict[str, Any] | None = None,
    check_size: bool = True,
) -> Envelope:
    """A validated envelope dict with a fresh time-ordered id. `check_size=False` leaves
    the size check to the caller's own `encode_envelope` (a streaming sender embeds
    that text in its journal line rather than encoding the body twice)."""
    parse_address(to)
    check_type(type)
    if level not in LEVELS:
        raise BadInput(f"invalid level {level!r}", hint="use info, warning or error")
    if mode is not None and mode not in MODES:
        raise BadInput(f"invalid mode {mode!r}", hint=f"use one of {', '.join(MODES)}")
    if summary is not None and len(summary) > MAX_SUMMARY_CHARS:
        raise BadInput(f"summary is longer than {MAX_SUMMARY_CHARS} characters")
    check_body(body)
    optional = {
        "mode": mode,
        "reason": reason,
        "priority": priority,
        "deadline": deadline,
        "idempotency_key": idempotency_key,
        "reply_to": reply_to,
    }
    envelope = build_envelope(
        to=to,
        type=type,
        body=body,
        sender=sender,
        summary=summary,
        level=level,
        extra={**{k: v for k, v in optional.items() if v is not None}, **(extra or {})},
    )
    if check_size:
        encode_envelope(envelope)
    return envelope


_NO_SESSION: Any = object()


def build_envelope(
    *,
    to: str,
    type: str,
    body: Any = None,
    sender: str,
    summary: str | None = None,
    level: str = "info",
    session: Any = _NO_SESSION,
    extra: dict[str, Any] | None = None,
) -> Envelope:
    """The one place an envelope's fields are assembled, in their stored order, with a
    fresh time-ordered id and `now_iso` stamp. Not validated: `make_envelope` checks what
    a caller typed; actors' own messages (follow-ups, `command.done`, the doctor's probe)
    come here directly, as their fields are made by actors itself. `session` (the owner a
    follow-up is for, None included) follows `to` when given."""
    envelope: dict[str, Any] = {"id": new_id(), "type": type, "to": to}
    if session is not _NO_SESSION:
        envelope["session"] = session
    envelope["from"] = sender
    # a blank summary says nothing where a reader (or a model) scans summaries: the type
    envelope["summary"] = summary if summary is not None and summary.strip() else type
    envelope["level"] = level
    envelope["ts"] = now_iso()
    envelope["body"] = body
    if extra:
        envelope.update(extra)
    return cast("Envelope", envelope)  # `extra` carries only the optional keys above


def encode_envelope(envelope: Envelope) -> str:
    """The envelope as stored (compact JSON), refused when over the size cap."""
    text, size = _encoded(envelope)
    if size > MAX_ENVELOPE_BYTES:
        raise BadInput(
            f"message is {size} bytes; the limit is {MAX_ENVELOPE_BYTES}",
            hint="write the payload to a file and send its path as the body",
        )
    return text


def _encoded(envelope: Envelope) -> tuple[str, int]:
    """The envelope as stored and its size in bytes; BadInput for what cannot be stored."""
    try:
        text = compact_json(envelope)
        return text, len(text.encode())
    except UnicodeEncodeError:
        raise BadInput(
            "message contains text that is not valid UTF-8 (a lone surrogate)",
            hint="send UTF-8 text, or base64-encode binary data",
        ) from None
    except RecursionError:
        raise BadInput(
            "message body is nested too deeply", hint="flatten it, or send a file path"
        ) from None
    except (TypeError, ValueError) as exc:  # not JSON data (e.g. a set, or a cycle)
        raise BadInput(f"message body is not JSON data: {exc}") from None


def parse_body(text: str | None, *, as_json: bool) -> Any:
    """A CLI body argument: text as is, or JSON with --body-json."""
    if text is None:
        return None
    if not as_json:
        return text
    try:
        return decode(text, max_depth=MAX_BODY_DEPTH)
    except TooDeep:
        raise BadInput(
            f"body is nested too deeply (more than {MAX_BODY_DEPTH} levels)",
            hint="flatten it, or send a file path",
        ) from None
    except Undecodable as exc:
        raise BadInput(
            f"body is not valid JSON: {exc}",
            hint="quote it for the shell, or drop --body-json to send it as text",
        ) from None

"""Typed envelopes: one JSON object per message, validated without pydantic.

The rules live here as plain functions so the CLI's `message` / `emit` paths stay fast
(importing pydantic would triple their start-up time); any typed model layered on top
must call these same functions.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime.addresses import parse_address
from runtime.errors import BadInput
from runtime.ids import new_id, now_iso

MAX_ENVELOPE_BYTES = 64 * 1024
"""Envelope cap (documented): larger payloads go to a file whose path is the body."""
MAX_SUMMARY_CHARS = 500
LEVELS = ("info", "warning", "error")
MODES = ("immediate", "next-message", "next-tool-call", "on-idle", "manual")
_TYPE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,127}")


def check_type(value: str) -> str:
    if not _TYPE_RE.fullmatch(value):
        raise BadInput(
            f"invalid message type {value[:80]!r}",
            hint="use a dotted name like player.next or task.assign (letters, digits, ._:-)",
        )
    return value


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
) -> dict[str, Any]:
    """A validated envelope dict with a fresh time-ordered id."""
    parse_address(to)
    check_type(type)
    if level not in LEVELS:
        raise BadInput(f"invalid level {level!r}", hint="use info, warning or error")
    if mode is not None and mode not in MODES:
        raise BadInput(f"invalid mode {mode!r}", hint=f"use one of {', '.join(MODES)}")
    if summary is not None and len(summary) > MAX_SUMMARY_CHARS:
        raise BadInput(f"summary is longer than {MAX_SUMMARY_CHARS} characters")
    envelope: dict[str, Any] = {
        "id": new_id(),
        "type": type,
        "to": to,
        "from": sender,
        "summary": summary if summary is not None else type,
        "level": level,
        "ts": now_iso(),
        "body": body,
    }
    optional = {
        "mode": mode,
        "reason": reason,
        "priority": priority,
        "deadline": deadline,
        "idempotency_key": idempotency_key,
        "reply_to": reply_to,
    }
    envelope.update({k: v for k, v in optional.items() if v is not None})
    if extra:
        envelope.update(extra)
    size = len(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_ENVELOPE_BYTES:
        raise BadInput(
            f"message is {size} bytes; the limit is {MAX_ENVELOPE_BYTES}",
            hint="write the payload to a file and send its path as the body",
        )
    return envelope


def parse_body(text: str | None, *, as_json: bool) -> Any:
    """A CLI body argument: text as is, or JSON with --json."""
    if text is None:
        return None
    if not as_json:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"body is not valid JSON: {exc.msg} at column {exc.colno}",
            hint="quote it for the shell, or drop --json to send it as text",
        ) from None

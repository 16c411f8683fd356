"""The text a harness's model sees when a follow-up is injected into its conversation.

One readable block, not raw JSON: a first line an agent can act on, the sender and kind,
then the body (compact JSON, capped so one follow-up can never flood a context window;
the full body stays in the session's `bodies/` file, which the block points at when it
was cut). Run-written text is made inert (runtime.core.terminal). The delivery id is included so an agent or a person can correlate it with
`actors inbox read` and the delivery journal.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.core.terminal import inert, one_line
from runtime.delivery.contract import DeliveryContext

MAX_BODY_CHARS = 6000


def injected_text(envelope: dict[str, Any], context: DeliveryContext) -> str:
    summary = one_line(str(envelope.get("summary") or envelope.get("type")))
    lines = [
        f"[actors] {summary}",
        f"from {envelope.get('from', '?')} · {envelope.get('type', 'message')}"
        f" · delivery {context.delivery_id}",
    ]
    body = envelope.get("body")
    if body not in (None, "", {}, []):
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, indent=1)
        text = inert(text, keep="\n\t")  # run-written: no control or invisible character
        if len(text) > MAX_BODY_CHARS:
            where = f"; full body: {context.body_file}" if context.body_file else ""
            text = text[:MAX_BODY_CHARS] + f"\n… (cut at {MAX_BODY_CHARS} characters{where})"
        lines += ["", text]
    return "\n".join(lines)

"""`webhook`: POST the envelope JSON to a URL, signed with HMAC-SHA256.

Options: `url` (http or https), optional `secret` (signs each request: header
`X-Actors-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<delivery id>.<body>">`,
the delivery id also in `X-Actors-Delivery`; a receiver rejects a stale `t` and dedupes
by delivery id, see docs/adapters.md), optional `timeout` seconds (default 5). A 2xx answer
is `delivered`; 429 is `deferred` until Retry-After; other 4xx are `failed` and not
retried (the request itself is wrong); 5xx, timeouts and connection errors are `failed`
and retryable.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, ClassVar
from urllib.parse import urlparse

from runtime.delivery.contract import (
    AdapterError,
    Capabilities,
    CheckedAdapter,
    DeliveryContext,
    Option,
    Receipt,
)

REPLAY_WINDOW_S = 300
"""How old a signed timestamp a receiver should accept (documented; `verify` uses it)."""


def signature(secret: str, delivery_id: str, body: bytes, timestamp: int | None = None) -> str:
    """`t=<unix>,v1=<hex>`: HMAC-SHA256 over the timestamp, the delivery id and the body,
    so a captured request cannot be replayed later or under another delivery id."""
    t = int(time.time()) if timestamp is None else timestamp
    signed = f"{t}.{delivery_id}.".encode() + body
    return f"t={t},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    header: str,
    delivery_id: str,
    body: bytes,
    *,
    now: float | None = None,
    window_s: float = REPLAY_WINDOW_S,
) -> bool:
    """A receiver's check of `X-Actors-Signature` (the reference for docs/adapters.md):
    well formed, fresh within `window_s` either way, and the HMAC matches. Deduping by
    delivery id is the receiver's own (it alone knows what it has seen)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        t = int(fields.get("t", ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - t) > window_s:
        return False
    expected = signature(secret, delivery_id, body, t).partition(",v1=")[2]
    return hmac.compare_digest(expected, fields.get("v1", ""))


class WebhookAdapter(CheckedAdapter):
    HARNESS = "webhook"
    capabilities = Capabilities(
        wake_mode="HTTP POST per delivery",
        level="D3",
        modes=("immediate", "on-idle", "manual"),
        notes="delivered = the receiver answered 2xx; what it does next is its own business",
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("url", "where to POST: http(s)://host[:port]/path"),
        Option("secret", "signs each request (X-Actors-Signature)"),
        Option("timeout", "seconds per request (default 5)", "seconds"),
    )

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        parsed = urlparse(options.get("url", ""))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise AdapterError("webhook needs -o url=http(s)://host[:port]/path")

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        import httpx

        body = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Actors-Delivery": context.delivery_id,
            "X-Actors-Attempt": str(context.attempt),
        }
        if self.options.get("secret"):
            headers["X-Actors-Signature"] = signature(
                self.options["secret"], context.delivery_id, body
            )
        try:
            response = httpx.post(
                self.options["url"],
                content=body,
                headers=headers,
                timeout=float(self.options.get("timeout", "5")),
            )
        except httpx.HTTPError as exc:
            return Receipt(
                "failed", context.delivery_id, retryable=True, reason=f"{type(exc).__name__}: {exc}"
            )
        code = response.status_code
        meta = {"http_status": code}
        if 200 <= code < 300:
            return Receipt("delivered", context.delivery_id, metadata=meta, observed=["triggered"])
        if code == 429:
            from runtime.core.ids import now_iso

            try:
                wait = float(response.headers.get("Retry-After", "5"))
            except ValueError:
                wait = 5.0
            at = now_iso(wait)
            return Receipt(
                "deferred", context.delivery_id, available_at=at, reason="HTTP 429", metadata=meta
            )
        return Receipt(
            "failed",
            context.delivery_id,
            retryable=code >= 500,
            reason=f"HTTP {code}",
            metadata=meta,
        )

"""`callback`: deliver to a Python callable in this process (for SDK users and tests).

Register with `register_callback(session_id, fn)`; `fn(envelope, context)` returns a
Receipt, or None for `delivered`. A session whose callback is not registered in the
delivering process gets a retryable `failed` receipt, so the delivery waits for a
process that has it (the envelope is durable in the session inbox meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from runtime.delivery.contract import AdapterBase, Capabilities, DeliveryContext, Option, Receipt

Callback = Callable[[dict[str, Any], DeliveryContext], Receipt | None]
_callbacks: dict[str, Callback] = {}


def register_callback(session_id: str, fn: Callback) -> None:
    _callbacks[session_id] = fn


def unregister_callback(session_id: str) -> None:
    _callbacks.pop(session_id, None)


class CallbackAdapter(AdapterBase):
    capabilities = Capabilities(
        wake_mode="in-process call", level="D5", notes="the callable sees the whole envelope"
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, options)
        self.session_id = str(session.get("id"))

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        fn = _callbacks.get(self.session_id)
        if fn is None:
            return Receipt(
                "failed",
                context.delivery_id,
                retryable=True,
                reason="no callback registered in this process",
            )
        try:
            receipt = fn(envelope, context)
        except Exception as exc:
            return Receipt(
                "failed",
                context.delivery_id,
                retryable=True,
                reason=f"callback raised {type(exc).__name__}: {exc}",
            )
        return receipt or Receipt("delivered", context.delivery_id, observed=["injected"])

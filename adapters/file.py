"""`file`: the session inbox itself, plus its wake file. The durable baseline.

Every delivery is appended to `sessions/<id>/inbox.jsonl` before any adapter runs, and
the wake file gets a line; this adapter only confirms that. An agent reads the bodies
with `actors inbox read` (level-triggered: it drains every unread entry at once), and a
harness hook or background watcher can wake on the wake file (see the harness adapters).
"""

from __future__ import annotations

from typing import Any, ClassVar

from runtime.delivery.contract import AdapterBase, Capabilities, DeliveryContext, Option, Receipt


class FileAdapter(AdapterBase):
    capabilities = Capabilities(
        wake_mode="wake file (sessions/<id>/wake) and per-consumer doorbell FIFOs",
        level="D3",
        notes="addressed durable enqueue; waking an agent needs a hook or a watcher",
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        return Receipt(
            "delivered",
            context.delivery_id,
            observed=["queued", "triggered"],
            metadata={"inbox": "sessions/<id>/inbox.jsonl"},
        )

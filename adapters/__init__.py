"""Harness adapters: one place per harness (its adapter, protocol client, hooks, install
edits, doctor judgement).

Adapters import the runtime (the contract in `runtime.delivery.contract`, the store),
never the reverse: the delivery engine finds an adapter by harness name in the registry
(`actors.adapters` entry points, built-ins declared the same way). The names below are
the contract re-exported for third-party adapters, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.core.lazy import lazy_getattr

_EXPORTS = {
    "Adapter": "runtime.delivery.contract",
    "AdapterBase": "runtime.delivery.contract",
    "AdapterError": "runtime.delivery.contract",
    "Capabilities": "runtime.delivery.contract",
    "DeliveryContext": "runtime.delivery.contract",
    "Option": "runtime.delivery.contract",
    "Receipt": "runtime.delivery.contract",
    "DeliveryRunner": "runtime.delivery.engine",
    "on_event": "runtime.delivery.engine",
    "register_callback": "adapters.callback",
    "unregister_callback": "adapters.callback",
    "adapter_class": "runtime.delivery.registry",
    "known_harnesses": "runtime.delivery.registry",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from adapters.callback import (
        register_callback as register_callback,
        unregister_callback as unregister_callback,
    )
    from runtime.delivery.contract import (
        Adapter as Adapter,
        AdapterBase as AdapterBase,
        AdapterError as AdapterError,
        Capabilities as Capabilities,
        DeliveryContext as DeliveryContext,
        Option as Option,
        Receipt as Receipt,
    )
    from runtime.delivery.engine import DeliveryRunner as DeliveryRunner, on_event as on_event
    from runtime.delivery.registry import (
        adapter_class as adapter_class,
        known_harnesses as known_harnesses,
    )

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())

"""Harness delivery adapters and the delivery runner.

Adapters depend on the runtime's file primitives and session store, never the reverse:
the runtime reaches delivery only through `runtime.followups`' hook (`adapters.delivery`
by default), and adapters are looked up by harness name in the registry (built-ins plus
the `actors.adapters` entry point group). Names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_getattr

_EXPORTS = {
    "Adapter": "adapters.base",
    "AdapterError": "adapters.base",
    "Capabilities": "adapters.base",
    "DeliveryContext": "adapters.base",
    "Receipt": "adapters.base",
    "DeliveryRunner": "adapters.delivery",
    "on_event": "adapters.delivery",
    "register_callback": "adapters.callback",
    "unregister_callback": "adapters.callback",
    "adapter_class": "adapters.registry",
    "known_harnesses": "adapters.registry",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from adapters.base import (
        Adapter as Adapter,
        AdapterError as AdapterError,
        Capabilities as Capabilities,
        DeliveryContext as DeliveryContext,
        Receipt as Receipt,
    )
    from adapters.callback import (
        register_callback as register_callback,
        unregister_callback as unregister_callback,
    )
    from adapters.delivery import DeliveryRunner as DeliveryRunner, on_event as on_event
    from adapters.registry import adapter_class as adapter_class, known_harnesses as known_harnesses

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())

"""Harness delivery adapters (the delivery issue fills this package).

Adapters depend on the runtime's file primitives and envelope models, never the reverse:
the runtime reaches them only through the registry by harness name.
"""

__all__: list[str] = []

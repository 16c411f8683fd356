"""The public API is exactly what `__all__` says, and every name resolves."""

from __future__ import annotations

import importlib

import pytest

EXPECTED = {
    "adapters": [
        "Adapter",
        "AdapterBase",
        "AdapterError",
        "Capabilities",
        "DeliveryContext",
        "DeliveryRunner",
        "Option",
        "Receipt",
        "adapter_class",
        "known_harnesses",
        "on_event",
        "register_callback",
        "unregister_callback",
    ],
    "actors": [
        "ActorsError",
        "BadInput",
        "Conflict",
        "NotFound",
        "Refused",
        "StateDamaged",
        "ack",
        "cancel",
        "emit",
        "inspect",
        "kill",
        "message",
        "recv",
        "result",
        "runs",
        "sender",
        "spawn",
        "status",
        "tail",
        "wait",
    ],
    "runtime": [
        "ActorsError",
        "BadInput",
        "Conflict",
        "NotFound",
        "Principal",
        "Refused",
        "RunPaths",
        "SpawnRequest",
        "StateDamaged",
        "StateRoot",
        "cancel",
        "current_principal",
        "derive",
        "kill",
        "list_runs",
        "parse_run_ref",
        "spawn",
        "status_of",
        "wait_for",
    ],
}


@pytest.mark.parametrize("package", sorted(EXPECTED))
def test_public_names(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == EXPECTED[package]
    for name in module.__all__:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError):
        module.no_such_name

"""Adapters by harness name, from the Python entry point group `actors.adapters` (name =
harness, value = `module:Class`), where the built-ins are declared like any third-party
adapter (pyproject.toml).

BUILTIN repeats the built-in entry points (a test keeps them equal) as the fast path:
importlib.metadata costs ~36 ms a process, paid only for a harness not found here."""

from __future__ import annotations

import importlib
from typing import Any

BUILTIN = {
    "file": "adapters.file:FileAdapter",
    "webhook": "adapters.webhook:WebhookAdapter",
    "callback": "adapters.callback:CallbackAdapter",
    "tmux": "adapters.tmux:TmuxAdapter",
    "claude_code": "adapters.claude_code.adapter:ClaudeCodeAdapter",
    "opencode": "adapters.opencode.adapter:OpenCodeAdapter",
    "codex": "adapters.codex.adapter:CodexAdapter",
    "pi": "adapters.pi.adapter:PiAdapter",
    "claude_teams": "adapters.claude_code.teams:ClaudeTeamsAdapter",
}


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="actors.adapters")}


def known_harnesses() -> list[str]:
    return sorted({**_entry_points(), **BUILTIN})


def adapter_class(harness: str) -> Any:
    spec = BUILTIN.get(harness) or _entry_points().get(harness)
    if spec is None:
        from runtime.delivery.contract import AdapterError  # here: the help text imports us

        raise AdapterError(f"unknown harness {harness!r} (known: {', '.join(known_harnesses())})")
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_adapter(session: dict[str, Any], harness: str | None = None) -> Any:
    cls = adapter_class(harness or session.get("harness", "file"))
    return cls(session, dict(session.get("options") or {}))

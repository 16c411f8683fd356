"""Adapters by harness name, from the Python entry point group `actors.adapters` (name =
harness, value = `module:Class`), where the built-ins are declared like any third-party
adapter (pyproject.toml).

BUILTIN repeats the built-in entry points (a test keeps them equal) as the fast path:
importlib.metadata costs ~36 ms a process, paid only for a harness not found here."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.delivery.contract import Option

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


def check_registration(
    harness: str, options: dict[str, str], *, reach: bool = True
) -> tuple[Any, dict[str, str]]:
    """What `actors session register` checks, the same for every harness, before anything
    is written: every key is one the adapter (or a `fallback` adapter, which gets the
    same options) declares in `OPTIONS`, and every value fits its declaration; then the
    adapters' own `check_options`; then `pin_options` (what the registering environment
    knows and the delivering process may not, e.g. the tmux server) and, unless `reach`
    is False (`--no-check`), `check_reachable` (a target that must answer now). Returns
    the adapter class and the options to record. Raises AdapterError (one line)."""
    import difflib

    from runtime.delivery.contract import AdapterError, check_values, common_options

    cls = adapter_class(harness)
    chain = [cls]
    for name in [v.strip() for v in options.get("fallback", "").split(",") if v.strip()]:
        try:
            chain.append(adapter_class(name))
        except AdapterError as exc:
            raise AdapterError(f"fallback: {exc}") from None
    declared: tuple[Option, ...] = common_options(cls)
    for each in chain:
        declared += tuple(getattr(each, "OPTIONS", ()))
    keys = list(dict.fromkeys(option.key for option in declared))
    if all(hasattr(each, "OPTIONS") for each in chain):  # an older third-party adapter: unchecked
        for key in options:
            if key not in keys:
                close = difflib.get_close_matches(key, keys, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise AdapterError(
                    f"{harness} has no option {key!r}: {hint}its options: {', '.join(keys)}"
                )
    check_values(harness, declared, options)
    for each in chain:
        each.check_options(options)
    pin = getattr(cls, "pin_options", None)
    if pin is not None:
        options = pin(options)
    reachable = getattr(cls, "check_reachable", None)
    if reach and reachable is not None:
        reachable(options)
    return cls, options

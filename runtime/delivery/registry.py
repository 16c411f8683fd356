"""Adapters by harness name, from the Python entry point group `actors.adapters` (name =
harness, value = `module:Class`), where the built-ins are declared like any third-party
adapter (pyproject.toml).

BUILTIN repeats the built-in entry points (a test keeps them equal) as the fast path:
importlib.metadata costs ~36 ms a process, paid only for a harness not found here.

Every class comes out as a `contract.Adapter`: one that does not derive from
`contract.AdapterBase` (a third-party adapter written to the older, duck-typed contract)
is used as a subclass of itself and AdapterBase, so the defaults fill in the parts it
leaves out and no caller asks a class whether it has one."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.delivery.contract import Adapter, Option

BUILTIN = {
    "file": "adapters.file:FileAdapter",
    "webhook": "adapters.webhook:WebhookAdapter",
    "callback": "adapters.callback:CallbackAdapter",
    "tmux": "adapters.tmux:TmuxAdapter",
    "claude_code": "adapters.claude_code.adapter:ClaudeCodeAdapter",
    "opencode": "adapters.opencode.adapter:OpenCodeAdapter",
    "codex": "adapters.codex.adapter:CodexAdapter",
    "pi": "adapters.pi.adapter:PiAdapter",
    "qwen_code": "adapters.qwen_input:QwenInputAdapter",
    "pi_tui": "adapters.pi.tui:PiTuiAdapter",
    "claude_teams": "adapters.claude_code.teams:ClaudeTeamsAdapter",
}


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="actors.adapters")}


def known_harnesses() -> list[str]:
    return sorted({**_entry_points(), **BUILTIN})


def adapter_class(harness: str) -> type[Adapter]:
    """The adapter class of a harness. Raises AdapterError (one line) for an unknown
    harness, an entry point that does not load, or one that is no adapter."""
    from runtime.delivery.contract import AdapterError  # here: the help text imports us

    spec = BUILTIN.get(harness) or _entry_points().get(harness)
    if spec is None:
        raise AdapterError(f"unknown harness {harness!r} (known: {', '.join(known_harnesses())})")
    adapted = _adapted.get(spec)
    if adapted is None:
        module, _, attr = spec.partition(":")
        try:  # what importlib.metadata's EntryPoint.load does, without reading metadata
            loaded: object = importlib.import_module(module)
            for part in attr.split("."):
                loaded = getattr(loaded, part)
        except Exception as exc:  # a third-party module runs its own code as it loads
            raise AdapterError(f"harness {harness!r} ({spec}) does not load: {_why(exc)}") from None
        adapted = _adapted[spec] = _as_adapter(harness, spec, loaded)
    return adapted


_adapted: dict[str, type[Adapter]] = {}
"""Loaded classes by entry point value: one class (and one mixed-in subclass) a process."""


def _as_adapter(harness: str, spec: str, loaded: object) -> type[Adapter]:
    from runtime.delivery.contract import AdapterBase, AdapterError

    if not isinstance(loaded, type):
        raise AdapterError(f"harness {harness!r} ({spec}) is not a class")
    if issubclass(loaded, AdapterBase):
        cls: type[AdapterBase] = loaded
    else:
        try:  # its own parts first, then AdapterBase's defaults
            cls = type(loaded.__name__, (loaded, AdapterBase), {"__module__": loaded.__module__})
        except Exception as exc:  # a metaclass that does not combine, an __init_subclass__
            raise AdapterError(
                f"harness {harness!r} ({spec}) cannot take AdapterBase's defaults ({_why(exc)}):"
                " derive it from runtime.delivery.contract.AdapterBase"
            ) from None
    if cls.__abstractmethods__:
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise AdapterError(f"harness {harness!r} ({spec}) is not an adapter: it has no {missing}")
    return cls


def _why(exc: Exception) -> str:
    from runtime.core.terminal import one_line

    return one_line(f"{type(exc).__name__}: {exc}", 300)


def make_adapter(session: dict[str, Any], harness: str | None = None) -> Adapter:
    cls = adapter_class(harness or session.get("harness", "file"))
    return cls(session, dict(session.get("options") or {}))


def check_registration(
    harness: str, options: dict[str, str], *, reach: bool = True
) -> tuple[type[Adapter], dict[str, str]]:
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
        declared += tuple(each.OPTIONS or ())
    keys = list(dict.fromkeys(option.key for option in declared))
    if all(each.OPTIONS is not None for each in chain):  # None: undeclared, keys unchecked
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
    options = cls.pin_options(options)
    if reach:
        cls.check_reachable(options)
    return cls, options

"""The adapter contract: how a harness receives one message and says what happened.

`receive_message(envelope, context) -> Receipt` and `check_options(options)`; on the
class `OPTIONS`, the typed `-o KEY=VALUE` keys it takes (registration refuses any other,
see `runtime.delivery.registry.check_registration`); optional `flush` and `cancel`, and
on the class `pin_options(options)` (what registration records from the registering
environment, e.g. the tmux server's socket), `check_reachable(options)` (registration
refuses a target that is not there now) and `judge_probe(probe)` (the
adapter writes `actors doctor delivery`'s levels itself, from a
`runtime.delivery.doctor.Probe`), so callers need not single a harness out by name. Each
adapter declares its capabilities: the wake mode it uses, the highest delivery level
(D0-D8) it can reach, and the delivery modes it supports. The envelope is already
durable in the session inbox when an adapter is called, so an adapter that fails loses
nothing: the receipt says whether and when to try again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from runtime.messaging.envelope import MODES

ReceiptStatus = Literal["accepted", "delivered", "deferred", "failed"]
Mode = Literal["immediate", "next-message", "next-tool-call", "on-idle", "manual"]


@dataclass
class Receipt:
    """What the harness did with one delivery attempt."""

    status: ReceiptStatus
    delivery_id: str
    retryable: bool = False
    available_at: str | None = None
    reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    observed: list[str] = field(default_factory=list)
    """States of queued -> triggered -> woke -> injected -> processed -> replied seen."""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], {})}


@dataclass
class DeliveryContext:
    """Why and how a message is being delivered (the delivery id is the idempotency key)."""

    delivery_id: str
    mode: str = "immediate"
    reason: str = "notification"
    priority: str = "normal"
    deadline: str | None = None
    session: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1
    body_file: str | None = None
    on_injected: Callable[[], None] | None = None
    """The engine's "the model has the body now" (marks it read in the session inbox). An
    adapter that goes on watching the turn it started calls it as soon as the body is in
    the conversation, so the model's own `inbox_read` in that turn does not get it again."""

    def injected(self) -> None:
        if self.on_injected is not None:
            self.on_injected()


@dataclass(frozen=True)
class Capabilities:
    wake_mode: str
    level: str
    modes: tuple[str, ...] = MODES
    notes: str = ""
    native: bool = False
    """D1: delivers into the already-running session itself (no new process or thread)."""
    injects: bool = False
    """D5 in full: the body itself reaches the model's context (not a doorbell + self-fetch)."""
    completion: bool = False
    """D7: the adapter can observe the turn the message started finishing (`processed`)."""


class Adapter(Protocol):
    capabilities: Capabilities

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt: ...


class FlushableAdapter(Adapter, Protocol):
    def flush(self, delivery_id: str | None = None) -> list[Receipt]: ...


class AdapterError(Exception):
    """Adapter options are wrong (raised at registration, where it can be known)."""


@dataclass(frozen=True)
class Option:
    """One `-o KEY=VALUE` an adapter takes: declared once, on the adapter class
    (`OPTIONS`), so registration can refuse a typo'd key or a bad value before anything
    is written, and the docs and the error name the same keys."""

    key: str
    help: str
    kind: Literal["text", "seconds", "choice"] = "text"
    choices: tuple[str, ...] = ()


def common_options(cls: Any) -> tuple[Option, ...]:
    """The two keys every harness takes: `mode` (one of the modes this adapter supports)
    and `fallback` (adapters to try after a final failure)."""
    modes = tuple(cls.capabilities.modes)
    return (
        Option("mode", "deliver every follow-up in this mode", "choice", modes),
        Option("fallback", "comma-separated harnesses tried after a final failure"),
    )


def check_values(harness: str, declared: tuple[Option, ...], options: dict[str, str]) -> None:
    """Each given value against its declaration (seconds >= 0, a choice among its
    values). Raises AdapterError naming the key and what it accepts."""
    by_key = {option.key: option for option in declared}
    for key, value in options.items():
        option = by_key.get(key)
        if option is None:
            continue
        if option.kind == "choice" and value not in option.choices:
            raise AdapterError(
                f"{harness} {key} must be one of {', '.join(option.choices)} (got {value!r})"
            )
        if option.kind == "seconds":
            check_seconds(harness, {key: value}, key)


NO_CHECK = "or register with --no-check to skip this check"
"""The tail of every reachability refusal: how to register a target that comes later."""


def connect_error(address: str | tuple[str, int], timeout: float = 3.0) -> str | None:
    """Why a Unix socket path (str) or a (host, port) does not accept a connection now,
    or None when it does. Registration's reachability check for socket-based adapters."""
    import socket

    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    if not isinstance(address, str) and ":" in address[0]:
        family = socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(address)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


class Refused(Exception):
    """A harness (or the way to it) turned one delivery attempt down: the adapter raises
    it from deep in its protocol code and answers with `receipt()` at the top, final
    unless `retryable`."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.retryable = retryable

    def receipt(self, delivery_id: str, metadata: dict[str, Any] | None = None) -> Receipt:
        return Receipt(
            "failed",
            delivery_id,
            retryable=self.retryable,
            reason=str(self),
            metadata=dict(metadata or {}),
        )


def check_seconds(harness: str, options: dict[str, str], *keys: str) -> None:
    """Timeouts and delays given as adapter options must be non-negative numbers."""
    for key in keys:
        if key not in options:
            continue
        try:
            seconds = float(options[key])
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:
            raise AdapterError(f"{harness} {key} must be a number of seconds (>= 0)")


def option_seconds(options: dict[str, str], key: str, default: float) -> float:
    """A seconds option (already checked by `check_seconds`), else its default."""
    return float(options.get(key, default))


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (time.monotonic), as receipts report stage timings."""
    import time

    return round((time.monotonic() - started) * 1000, 1)


def processed_timeout(options: dict[str, str]) -> float:
    """How long an adapter watches for the turn its message started to finish: the
    session's `processed_timeout`, else ACTORS_PROCESSED_TIMEOUT (`actors doctor delivery`
    raises it so its probe's turn can end), else 3 s."""
    from runtime.core import config

    explicit = options.get("processed_timeout")
    return float(explicit) if explicit else config.seconds(config.PROCESSED_TIMEOUT)

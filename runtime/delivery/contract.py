"""The adapter contract: how a harness receives one message and says what happened.

`Adapter` is the one definition of what an adapter is, a typed Protocol the type checker
holds every built-in adapter to (each derives from `AdapterBase`, which declares it):
`receive_message(envelope, context) -> Receipt`, built as `Class(session, options)` for
every attempt; on the class, its `capabilities` (the wake mode it uses, the highest
delivery level D0-D8 it can reach, the delivery modes it supports), its `OPTIONS` (the
typed `-o KEY=VALUE` keys it takes: registration refuses any other, see
`runtime.delivery.registry.check_registration`), `check_options(options)` (the rules
between keys), `pin_options(options)` (what registration records from the registering
environment, e.g. the tmux server's socket), `check_reachable(options)` (registration
refuses a target that is not there now) and `judge_probe(probe)` (the levels of `actors
doctor delivery`, written from a `runtime.delivery.doctor.Probe`), so callers need not
single a harness out by name. `AdapterBase` holds the defaults of all but
`receive_message`; the registry mixes it into a third-party class that does not derive
from it, so nothing ever asks a class whether it has a part. The envelope is already
durable in the session inbox when an adapter is called, so an adapter that fails loses
nothing: the receipt says whether and when to try again.
"""

from __future__ import annotations

import os
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from runtime.messaging.envelope import MODES

if TYPE_CHECKING:
    from runtime.delivery.doctor import Probe

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


@runtime_checkable
class Adapter(Protocol):
    """What the delivery engine, registration and `actors doctor delivery` rely on an
    adapter class for. Registration and the doctor use the class parts without an
    instance, so they are class attributes and static or class methods."""

    capabilities: ClassVar[Capabilities]
    OPTIONS: ClassVar[tuple[Option, ...] | None]
    """The `-o` keys it takes; None: not declared (an adapter older than `OPTIONS`), its
    keys are left unchecked (only `mode` and `fallback` are)."""

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None: ...

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        """Surface one message; the receipt says what happened (never raise for a harness
        that is down: return `failed`, retryable)."""
        ...

    @staticmethod
    def check_options(options: dict[str, str]) -> dict[str, str]:
        """The rules between keys (raise AdapterError: registration exits 2)."""
        ...

    @classmethod
    def pin_options(cls, options: dict[str, str]) -> dict[str, str]:
        """The options to record, completed from the registering environment."""
        ...

    @classmethod
    def check_reachable(cls, options: dict[str, str]) -> None:
        """Registration (unless `--no-check`): raise AdapterError if the target is not
        there now."""
        ...

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """Write the D1-D8 lines of `actors doctor delivery` with `probe.level`."""
        ...


class AdapterBase(Adapter):
    """The defaults of every part but `receive_message`: derive from it and declare only
    what the harness needs. The registry uses a class that does not derive from it (an
    older third-party adapter) as a subclass of both, so these defaults fill in what
    that class leaves out."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        wake_mode="not declared",
        level="D3",
        notes="the durable session inbox the runtime appends to before any adapter runs",
    )
    OPTIONS: ClassVar[tuple[Option, ...] | None] = None

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        self.session = session
        self.options = options

    @abstractmethod
    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        raise NotImplementedError

    @staticmethod
    def check_options(options: dict[str, str]) -> dict[str, str]:
        return options

    @classmethod
    def pin_options(cls, options: dict[str, str]) -> dict[str, str]:
        return options

    @classmethod
    def check_reachable(cls, options: dict[str, str]) -> None:
        return None

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """The doctor's own judgement: from the stages the receipt confirmed for an
        adapter that injects the body, else the plain judgement of a durable inbox."""
        probe.judge_generic(cls.capabilities)


class CheckedAdapter(AdapterBase):
    """An adapter whose options are checked whenever it is made, not only at
    registration: a session recorded by hand or by an older version fails its delivery
    with the line registration would have given. Its `check_options` is its own rules
    between keys (`check_rules`), then every value against its OPTIONS (check_values)."""

    HARNESS: ClassVar[str]
    """Its name in every line it says (`actors session register --harness NAME`)."""

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, self.check_options(options))

    @classmethod
    def check_options(cls, options: dict[str, str]) -> dict[str, str]:
        cls.check_rules(options)
        check_values(cls.HARNESS, cls.OPTIONS or (), options)
        return options

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        """The rules between its keys (a key it needs, a path that must be absolute):
        raise AdapterError naming the fix."""

    @classmethod
    def needs(cls, options: dict[str, str], key: str, shape: str) -> str:
        """Option `key`'s value; without one, AdapterError: `HARNESS needs -o KEY=SHAPE`
        (`shape` shows the value and where it comes from)."""
        value = options.get(key)
        if not value:
            raise AdapterError(f"{cls.HARNESS} needs -o {key}={shape}")
        return value

    @classmethod
    def absolute(cls, options: dict[str, str], key: str) -> None:
        """Option `key`, when given, must be an absolute path: the delivering process
        (a runner, elsewhere) does not share the registering one's directory."""
        value = options.get(key)
        if value is not None and not os.path.isabs(value):
            raise AdapterError(f"{cls.HARNESS} {key} must be an absolute path (got {value!r})")


def common_options(cls: type[Adapter]) -> tuple[Option, ...]:
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
    """Timeouts and delays given as adapter options follow the one seconds rule
    (runtime.core.config.parse_seconds): an infinite or month-long one would fail in the
    poll of the delivery that uses it, not at `session register`."""
    from runtime.core.config import SECONDS_RULE, parse_seconds

    for key in keys:
        if key in options and parse_seconds(options[key]) is None:
            raise AdapterError(f"{harness} {key} must be {SECONDS_RULE}")


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

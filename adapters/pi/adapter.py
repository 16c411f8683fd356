"""`pi`: inject a follow-up into a pi agent as a user message, over `adapters.pi.host`.

pi's RPC mode only talks to the process that spawned it, so a pi session reachable by
actors is one started by `actors-pi-host --socket PATH -- pi ...`; this adapter
is a client of that socket. (A person's own interactive pi is reached the other way: the
actors pi extension inside it, `actors install pi`, harness `pi_tui`: adapters/pi/tui.py.)

One delivery, on one connection:
1. `get_messages`: a user message containing the delivery id means an earlier attempt
   already landed, and the last `queue_update` (replayed by the host on connect) shows
   whether one is still waiting in pi's queue. Either way nothing is sent again, so a
   retried delivery never becomes a second message.
2. `prompt` with the text of `render.injected_text` and a `streamingBehavior`: `steer`
   for mode `immediate`, `followUp` otherwise. pi starts a turn at once when idle and
   queues the message when busy, decided inside pi in one step. The separate `steer` /
   `follow_up` commands are not used: sent to an agent that went idle after we looked
   (`get_state`), they only queue, and the message then waits silently for somebody's
   next prompt (measured on pi 0.73.1).
3. `injected` = pi's `message_end` event for a user message containing the delivery id
   (within `confirm_timeout`); `processed` = the assistant `message_end` (or `agent_end`)
   that follows it, without an error stop, within `processed_timeout`.

Receipts: `delivered` with observed triggered + injected (+ processed) once the message is
in the conversation; `accepted` when pi took it but it is still queued behind a busy turn
when `confirm_timeout` runs out (final: pi owns it now, and resending could double it;
pi's queues are process memory, so it is lost if pi exits first); `failed`, retryable,
when the socket is missing or refuses (the host is not running), the connection breaks
before pi answered, or pi acknowledged the prompt but it is neither queued nor in the
conversation (dropped: nothing would ever deliver it, so a retry is safe); `failed` with
pi's own error text when pi rejects the prompt (retryable only for pi's "already
processing" race).

Options: `socket` (required, absolute path of the host's socket), `confirm_timeout`
(seconds, default 5), `processed_timeout` (seconds; default $ACTORS_PROCESSED_TIMEOUT,
else 3; 0 = do not wait for the turn).

Capabilities: D7, since completion is observed from pi's own events. `native=False`: it is
a pi process we started and host, not the user's own TUI session. `injects=True`: the body
is the user message itself. Modes: `immediate` (steer: after the running turn's tool
calls, before its next model call), `on-idle` (follow-up: when the agent would stop) and
`manual` (held by the delivery runner until `actors flush`, then a follow-up).
`next-message` and `next-tool-call` are not claimed: they are released by a harness hook
at that boundary, and pi in RPC mode runs no actors hooks, so they would never be
released.
"""

from __future__ import annotations

import json
import os
import select
import socket
import time
from collections.abc import Callable
from typing import Any, ClassVar

from runtime.core.bounded_json import decode
from runtime.delivery.contract import (
    NO_CHECK,
    AdapterError,
    Capabilities,
    CheckedAdapter,
    DeliveryContext,
    Option,
    Receipt,
    Refused,
    connect_error,
    option_seconds,
    processed_timeout,
)
from runtime.delivery.render import delivery_ids, injected_text

SUN_PATH_MAX = 107
REQUEST_TIMEOUT_S = 10.0
"""How long one RPC command may take to be answered (pi answers in milliseconds)."""

Event = dict[str, Any]


class _Broken(Exception):
    """The connection to the host ended or pi did not answer in time."""


class _Connection:
    """One client connection to pi_host: commands with ids, and every event, in order."""

    def __init__(self, path: str) -> None:
        from runtime.core.listeners import foreign_peer

        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(path)
            owner = foreign_peer(self._sock)
            if owner is not None:  # a host path another user took: nothing goes to it
                raise PermissionError(f"the pi host socket {path} belongs to uid {owner}")
        except OSError:
            self._sock.close()
            raise
        self._buffer = bytearray()
        self._sequence = 0
        self.events: list[tuple[float, Event]] = []
        """(monotonic time read, event) for every non-response line, in arrival order."""
        self.queued: list[str] = []
        """pi's steer + follow-up queue, as of the last `queue_update` seen."""

    def close(self) -> None:
        self._sock.close()

    def _read(self, deadline: float) -> Event | None:
        """The next message, or None once `deadline` passes."""
        while (cut := self._buffer.find(b"\n")) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._sock], [], [], remaining)[0]:
                return None
            data = self._sock.recv(1 << 16)
            if not data:
                raise _Broken("pi_host closed the connection (did pi exit?)")
            self._buffer += data
        line = bytes(self._buffer[:cut])
        del self._buffer[: cut + 1]
        message = decode(line)
        if not isinstance(message, dict):
            return self._read(deadline)
        if message.get("type") != "response":
            self.events.append((time.monotonic(), message))
            if message.get("type") == "queue_update":
                self.queued = [
                    str(text) for key in ("steering", "followUp") for text in message.get(key, [])
                ]
        return message

    def request(self, command: Event, timeout: float = REQUEST_TIMEOUT_S) -> Event:
        """Send one command; return pi's response to it (events read meanwhile are kept)."""
        self._sequence += 1
        ident = f"actors-{self._sequence}"
        self._sock.sendall(json.dumps({**command, "id": ident}).encode() + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message is None:
                raise _Broken(f"pi did not answer {command['type']} within {timeout:g}s")
            if message.get("type") == "response" and message.get("id") == ident:
                return message

    def wait_event(
        self, matches: Callable[[Event], bool], start: int, deadline: float
    ) -> int | None:
        """Index of the first event from `start` on that `matches`, reading until `deadline`."""
        index = start
        while True:
            while index < len(self.events):
                if matches(self.events[index][1]):
                    return index
                index += 1
            if self._read(deadline) is None:
                return None


def _text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _mentions(text: str, delivery_id: str) -> bool:
    """Whether `text` is this delivery's prompt: the delivery id on one of our own header
    lines (runtime.delivery.render), never an id a run's text merely quotes."""
    return delivery_id in delivery_ids(text)


def _is_user_with(delivery_id: str, kind: str = "message_end") -> Callable[[Event], bool]:
    def matches(event: Event) -> bool:
        message = event.get("message")
        return (
            event.get("type") == kind
            and isinstance(message, dict)
            and message.get("role") == "user"
            and _mentions(_text(message), delivery_id)
        )

    return matches


def _is_completion(event: Event) -> bool:
    message = event.get("message")
    return event.get("type") == "agent_end" or (
        event.get("type") == "message_end"
        and isinstance(message, dict)
        and message.get("role") == "assistant"
    )


def _stop_reason(event: Event) -> str | None:
    """Why the model's reply ended (`stop`, `toolUse`, `error`, `aborted`, ...)."""
    message = event.get("message")
    if event.get("type") == "agent_end":
        messages = event.get("messages") or []
        message = messages[-1] if messages else None
    if isinstance(message, dict) and message.get("role") == "assistant":
        return str(message.get("stopReason") or "") or None
    return None


class PiAdapter(CheckedAdapter):
    HARNESS = "pi"
    capabilities = Capabilities(
        wake_mode="user message over pi RPC (prompt, or steer/follow-up while busy) via pi_host",
        level="D7",
        modes=("immediate", "on-idle", "manual"),
        notes="a pi we host in RPC mode (not a user's TUI); injected and processed seen in pi events",
        native=False,
        injects=True,
        completion=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("socket", "the absolute path of the pi host's socket"),
        Option("confirm_timeout", "seconds to see the message in pi (default 5)", "seconds"),
        Option("processed_timeout", "seconds to watch the turn finish (default 3)", "seconds"),
    )

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, options)
        self.socket = self.options["socket"]
        self.confirm_timeout = option_seconds(self.options, "confirm_timeout", 5)
        self.processed_timeout = processed_timeout(self.options)

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        path = cls.needs(
            options, "socket", "PATH, the socket of `actors-pi-host --socket PATH -- pi ...`"
        )
        cls.absolute(options, "socket")
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            raise AdapterError(
                f"pi socket path is longer than {SUN_PATH_MAX} bytes (a Unix socket limit);"
                " use a shorter one"
            )

    @staticmethod
    def check_reachable(options: dict[str, str]) -> None:
        """Registration: the pi host's socket accepts a connection."""
        why = connect_error(options["socket"])
        if why is not None:
            raise AdapterError(
                f"no pi host at {options['socket']} ({why}): start `actors-pi-host"
                f" --socket {options['socket']} -- pi ...` first, {NO_CHECK}"
            )

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        ident = context.delivery_id
        try:
            connection = _Connection(self.socket)
        except FileNotFoundError:
            return self._unreachable(ident, "does not exist")
        except ConnectionRefusedError:
            return self._unreachable(ident, "refuses connections")
        except PermissionError as exc:  # another user's socket there: final, nothing sent
            return Refused(f"{exc}; nothing was sent", retryable=False).receipt(ident)
        except OSError as exc:
            return self._unreachable(ident, f"cannot be reached ({exc.strerror or exc})")
        try:
            return self._deliver(connection, injected_text(envelope, context), context)
        except (_Broken, OSError, ValueError) as exc:
            return Refused(f"pi host socket {self.socket}: {exc}", retryable=True).receipt(ident)
        finally:
            connection.close()

    def _unreachable(self, ident: str, why: str) -> Receipt:
        return Refused(
            f"pi host socket {self.socket} {why}: is `actors-pi-host"
            f" --socket {self.socket} -- pi ...` running?",
            retryable=True,
        ).receipt(ident)

    def _deliver(self, connection: _Connection, text: str, context: DeliveryContext) -> Receipt:
        ident = context.delivery_id
        state = connection.request({"type": "get_state"})
        data = state.get("data") or {}
        meta: dict[str, Any] = {
            "socket": self.socket,
            "session": data.get("sessionId"),
            "session_file": data.get("sessionFile"),
        }
        history = (connection.request({"type": "get_messages"}).get("data") or {}).get(
            "messages"
        ) or []
        landed = [
            i
            for i, m in enumerate(history)
            if m.get("role") == "user" and _mentions(_text(m), ident)
        ]
        if landed:
            observed = ["triggered", "injected"]
            if any(m.get("role") == "assistant" for m in history[landed[0] + 1 :]):
                observed.append("processed")
            return Receipt(
                "delivered",
                ident,
                observed=observed,
                metadata={**meta, "duplicate": True, "body_injected": True},
            )

        start = len(connection.events)
        sent_at = time.monotonic()
        if any(_mentions(queued, ident) for queued in connection.queued):
            meta.update(duplicate=True, boundary="already-queued")
        else:
            streaming = bool(data.get("isStreaming"))
            behavior = "steer" if context.mode == "immediate" else "followUp"
            response = connection.request(
                {"type": "prompt", "message": text, "streamingBehavior": behavior}
            )
            if not response.get("success"):
                error = str(response.get("error") or "rejected without a reason")
                return Receipt(
                    "failed",
                    ident,
                    retryable="already processing" in error.lower(),
                    reason=f"pi rejected the prompt: {error.splitlines()[0]}",
                    metadata=meta,
                )
            meta.update(
                streaming=streaming,
                boundary=("queued-steer" if behavior == "steer" else "queued-follow-up")
                if streaming
                else "sent",
            )

        found = connection.wait_event(_is_user_with(ident), start, sent_at + self.confirm_timeout)
        if found is None:
            return self._unconfirmed(connection, ident, start, meta)
        injected_at = connection.events[found][0]
        meta["injected_ms"] = round((injected_at - sent_at) * 1000, 1)
        meta["body_injected"] = True
        observed = ["triggered", "injected"]
        done = connection.wait_event(
            _is_completion, found + 1, injected_at + self.processed_timeout
        )
        if done is not None:
            event_at, event = connection.events[done]
            meta["stop_reason"] = _stop_reason(event)
            if meta["stop_reason"] not in ("error", "aborted"):
                observed.append("processed")
                meta["processed_ms"] = round((event_at - sent_at) * 1000, 1)
        return Receipt("delivered", ident, observed=observed, metadata=meta)

    def _unconfirmed(
        self, connection: _Connection, ident: str, start: int, meta: dict[str, Any]
    ) -> Receipt:
        """Not seen landing in time: find out where the message is before answering.

        Queued (or starting) is `accepted`: pi owns it, and a resend could double it.
        Nowhere at all means pi acknowledged it and dropped it (an `abort` clears pi's
        queues; two racing prompts lose one, see pi_host): nothing will deliver it, so a
        retry is both needed and safe."""
        history = connection.request({"type": "get_messages"}).get("data") or {}
        if any(
            m.get("role") == "user" and _mentions(_text(m), ident)
            for m in history.get("messages") or []
        ):
            meta["body_injected"] = True
            return Receipt("delivered", ident, observed=["triggered", "injected"], metadata=meta)
        starting = connection.wait_event(_is_user_with(ident, "message_start"), start, 0.0)
        if starting is not None or any(_mentions(queued, ident) for queued in connection.queued):
            return Receipt(
                "accepted",
                ident,
                observed=["triggered"],
                reason=f"pi queued it ({meta['boundary']}) but it was not in the conversation"
                f" within {self.confirm_timeout:g}s; it waits in pi's memory (lost if pi exits)",
                metadata=meta,
            )
        return Receipt(
            "failed",
            ident,
            retryable=True,
            reason="pi acknowledged the prompt, but it is neither queued nor in the"
            " conversation (dropped by pi)",
            metadata=meta,
        )

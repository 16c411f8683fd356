"""`codex`: a live Codex thread, through the app-server that holds it.

The follow-up becomes a user turn in the thread (`turn/start`, with
`clientUserMessageId` = the delivery id). Stages are confirmed from the app-server's own
notifications, so the connection first subscribes to the thread with `thread/resume`
(on a loaded thread that only subscribes: the thread, its turns and its goal are left as
they are; on an unloaded one it loads it from CODEX_HOME) and unsubscribes at the end:
- `injected`: the `item/completed` userMessage whose `clientId` is the delivery id;
- `processed`: `turn/completed` for the turn that carried it.
Idempotency: before starting a turn the thread's recent items are searched for that
`clientId`; a retried delivery that already landed is confirmed, never sent twice.

Modes: `on-idle` holds while the thread is `active` until `thread/status/changed` says it
is idle (up to `hold_timeout`, then the delivery is deferred and retried); `immediate`
sends at once, and Codex folds a `turn/start` on a busy thread into the running turn (a
steer: same turn id). `manual` waits for `actors flush`.

Transports (one of): `socket` = the `--listen unix://PATH` path (WebSocket over a Unix
socket), `url` = `ws://127.0.0.1:PORT`, or `command` = an app-server we start on stdio
(e.g. `codex app-server`, with `codex_home`), which loads the thread from disk: only for
a thread no live Codex process holds (D1 does not hold there). Also `thread` (required),
`confirm_timeout` (s, default 10), `processed_timeout` (s, default 3), `hold_timeout` (s,
default 20).
"""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

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
    elapsed_ms,
    option_seconds,
    processed_timeout,
)
from runtime.delivery.render import injected_text

_T = TypeVar("_T")
_FINAL_ERRORS = ("thread not found", "invalid thread id", "thread not loaded", "no rollout found")
_FOREIGN = "nothing was sent"
"""The mark of adapters.codex.rpc's refusal of a socket another user holds: final too."""


class CodexAdapter(CheckedAdapter):
    HARNESS = "codex"
    capabilities = Capabilities(
        wake_mode="JSON-RPC turn/start into the live thread via its app-server",
        level="D7",
        modes=("immediate", "on-idle", "manual"),
        notes="full message injection; injected from item/completed, processed from turn/completed",
        native=True,
        injects=True,
        completion=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("socket", "the app-server's --listen unix://PATH"),
        Option("url", "the app-server's ws://127.0.0.1:PORT"),
        Option("command", "an app-server to start on stdio, e.g. 'codex app-server'"),
        Option("codex_home", "CODEX_HOME for `command`"),
        Option("thread", "the live thread's id"),
        Option(
            "confirm_timeout", "seconds to see the message in the thread (default 10)", "seconds"
        ),
        Option("processed_timeout", "seconds to watch the turn finish (default 3)", "seconds"),
        Option("hold_timeout", "seconds on-idle waits for an idle thread (default 20)", "seconds"),
    )

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, options)
        self.thread = self.options["thread"]

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        given = [k for k in ("socket", "url", "command") if options.get(k)]
        if len(given) != 1:
            raise AdapterError(
                "codex needs exactly one of -o socket=PATH (app-server --listen unix://PATH),"
                " -o url=ws://127.0.0.1:PORT or -o command='codex app-server'"
            )
        if options.get("url") and not options["url"].startswith("ws://"):
            raise AdapterError("codex url must be ws://HOST:PORT")
        cls.needs(options, "thread", "<thread id> (the live thread's id)")

    @staticmethod
    def check_reachable(options: dict[str, str]) -> None:
        """Registration: the app-server's socket or port accepts a connection, or the
        `command` exists (a Codex that is not listening would fail every delivery)."""
        if options.get("command"):
            program = (shlex.split(options["command"]) or [""])[0]
            if shutil.which(program) is None:
                raise AdapterError(f"codex command {program!r} is not on PATH; {NO_CHECK}")
            return
        address: str | tuple[str, int]
        if options.get("socket"):
            where, address = options["socket"], options["socket"]
        else:
            from adapters.codex.rpc import _host_port

            where, address = options["url"], _host_port(options["url"])
        why = connect_error(address)
        if why is not None:
            raise AdapterError(
                f"no codex app-server at {where} ({why}): start `codex app-server --listen"
                f" unix://PATH` (or ws://127.0.0.1:PORT) and register that, {NO_CHECK}"
            )

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        from adapters.codex.rpc import CodexError

        try:
            receipt: Receipt = _run_trio(lambda: self._deliver(envelope, context))
            return receipt
        except CodexError as exc:
            text = str(exc)
            final = any(marker in text for marker in _FINAL_ERRORS)
            hint = " (resume the thread in Codex, then flush)" if final else ""
            final = final or _FOREIGN in text
            return Refused(f"codex: {text}{hint}", retryable=not final).receipt(context.delivery_id)

    def _connect(self) -> Any:
        from adapters.codex.rpc import connect

        if self.options.get("command"):
            env = dict(os.environ)
            if self.options.get("codex_home"):
                env["CODEX_HOME"] = self.options["codex_home"]
            return connect(command=shlex.split(self.options["command"]), env=env)
        return connect(socket=self.options.get("socket"), url=self.options.get("url"))

    async def _deliver(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        from adapters.codex.rpc import CodexError

        started = time.monotonic()
        async with self._connect() as conn:
            await conn.initialize()
            try:
                status = await self._status(conn)
            except CodexError as exc:
                if "Not initialized" not in str(exc):
                    raise
                await conn.initialize()  # a proxy that lost our handshake: once more
                status = await self._status(conn)
            subscribed = await self._subscribe(conn)
            try:
                return await self._into_thread(conn, status, subscribed, envelope, context, started)
            finally:
                if subscribed and conn.closed is None:
                    try:
                        await conn.request("thread/unsubscribe", {"threadId": self.thread})
                    except CodexError:
                        pass

    async def _status(self, conn: Any) -> str:
        """The thread's status; a thread this app-server has not loaded is loaded
        (resumed) from CODEX_HOME first."""
        from adapters.codex.rpc import CodexError

        try:
            read = await conn.request("thread/read", {"threadId": self.thread})
        except CodexError as exc:
            if "not loaded" not in str(exc):
                raise
            read = await conn.request(
                "thread/resume", {"threadId": self.thread, "excludeTurns": True}
            )
        return str(((read.get("thread") or {}).get("status") or {}).get("type", "idle"))

    async def _subscribe(self, conn: Any) -> bool:
        """Subscribe this connection to the thread's item and turn notifications.

        `thread/resume` on a loaded thread only subscribes (turns and goal untouched). A
        thread with no turn yet has no rollout to resume from; then the stages are
        confirmed by reading the thread back instead."""
        from adapters.codex.rpc import CodexError

        try:
            await conn.request("thread/resume", {"threadId": self.thread, "excludeTurns": True})
        except CodexError as exc:
            if "no rollout" in str(exc):
                return False
            raise
        return True

    async def _into_thread(
        self,
        conn: Any,
        status: str,
        subscribed: bool,
        envelope: dict[str, Any],
        context: DeliveryContext,
        started: float,
    ) -> Receipt:
        ident = context.delivery_id
        metadata: dict[str, Any] = {"thread": self.thread, "thread_status": status}
        landed = await self._find_item(conn, ident)
        if landed is not None:
            metadata.update(already_stored=True, turn=landed, body_injected=True)
            return Receipt("delivered", ident, observed=["injected"], metadata=metadata)
        if status == "active" and context.mode == "on-idle":
            held = await self._hold_until_idle(conn, ident, metadata)
            if held is not None:
                return held
        mark = len(conn.notifications)
        turn = await conn.request(
            "turn/start",
            {
                "threadId": self.thread,
                "input": [{"type": "text", "text": injected_text(envelope, context)}],
                "clientUserMessageId": ident,
            },
        )
        turn_id = (turn.get("turn") or {}).get("id")
        metadata.update(turn=turn_id, steered=status == "active" and context.mode != "on-idle")
        metadata["confirmed_by"] = "notifications" if subscribed else "reading the thread"
        observed = ["triggered"]
        if not await self._injected(conn, ident, subscribed, mark):
            return Receipt(
                "accepted",
                ident,
                observed=observed,
                reason=conn.closed or "turn started, user message not yet seen",
                metadata=metadata,
            )
        observed.append("injected")
        metadata["body_injected"] = True
        metadata["injected_ms"] = elapsed_ms(started)
        context.injected()  # read now: the woken turn may call inbox_read itself
        turn_status = await self._turn_status(conn, turn_id, subscribed, mark)
        if turn_status is not None:
            metadata["turn_status"] = turn_status
            if turn_status == "completed":
                observed.append("processed")
                metadata["processed_ms"] = elapsed_ms(started)
        return Receipt("delivered", ident, observed=observed, metadata=metadata)

    async def _hold_until_idle(
        self, conn: Any, ident: str, metadata: dict[str, Any]
    ) -> Receipt | None:
        """Mode on-idle on a busy thread: wait for it to go idle (None), else a deferral."""
        hold_started = time.monotonic()
        idle = await conn.wait_for(  # thread/status/changed reaches every connection
            lambda n: (
                n.get("method") == "thread/status/changed"
                and (n.get("params") or {}).get("threadId") == self.thread
                and ((n.get("params") or {}).get("status") or {}).get("type") != "active"
            ),
            option_seconds(self.options, "hold_timeout", 20),
        )
        metadata["held_ms"] = elapsed_ms(hold_started)
        if idle is not None:
            return None
        return Receipt(
            "deferred",
            ident,
            reason="the thread stayed busy; on-idle delivery will try again",
            metadata=metadata,
        )

    async def _injected(self, conn: Any, ident: str, subscribed: bool, mark: int) -> bool:
        """The user message carrying this delivery was stored in the thread in time."""

        async def stored() -> bool:
            return await self._find_item(conn, ident) is not None

        return await self._confirm(
            conn,
            lambda n: (
                n.get("method") == "item/completed"
                and ((n.get("params") or {}).get("item") or {}).get("clientId") == ident
            ),
            None if subscribed else stored,
            option_seconds(self.options, "confirm_timeout", 10),
            mark,
        )

    async def _turn_status(
        self, conn: Any, turn_id: str | None, subscribed: bool, mark: int
    ) -> str | None:
        """The status the turn ended with, or None when it did not end within
        processed_timeout."""
        outcome: dict[str, str] = {}

        def finished(note: dict[str, Any]) -> bool:
            turn = (note.get("params") or {}).get("turn") or {}
            if note.get("method") == "turn/completed" and turn.get("id") == turn_id:
                outcome["status"] = str(turn.get("status"))
                return True
            return False

        async def turn_over() -> bool:
            listed = await conn.request(
                "thread/turns/list", {"threadId": self.thread, "limit": 20, "sortDirection": "desc"}
            )
            for entry in listed.get("data") or []:
                if entry.get("id") == turn_id and entry.get("status") != "inProgress":
                    outcome["status"] = str(entry.get("status"))
                    return True
            return False

        ended = await self._confirm(
            conn, finished, None if subscribed else turn_over, processed_timeout(self.options), mark
        )
        return outcome.get("status") if ended else None

    @staticmethod
    async def _confirm(
        conn: Any,
        note: Callable[[dict[str, Any]], bool],
        poll: Callable[[], Any] | None,
        timeout: float,
        mark: int,
    ) -> bool:
        """Wait for the notification; without a subscription, read the thread back
        whenever anything arrives (or every 100 ms)."""
        if poll is None:
            return await conn.wait_for(note, timeout, mark) is not None
        deadline = time.monotonic() + timeout
        while True:
            if await poll():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or conn.closed is not None:
                return False
            await conn.wait_for(lambda _: True, min(0.1, remaining), len(conn.notifications))

    async def _find_item(self, conn: Any, ident: str) -> str | None:
        """The turn id of a user message this delivery already put in the thread."""
        from adapters.codex.rpc import CodexError

        try:
            listed = await conn.request(
                "thread/items/list",
                {"threadId": self.thread, "limit": 200, "sortDirection": "desc"},
            )
        except CodexError as exc:
            if "not supported" in str(exc):  # a thread with no turn yet has no items
                return None
            raise
        for entry in listed.get("data") or []:
            item = entry.get("item") or {}
            if item.get("type") == "userMessage" and item.get("clientId") == ident:
                return str(entry.get("turnId"))
        return None


def _run_trio(function: Callable[[], Any]) -> Any:
    """trio.run the coroutine function; from inside a running trio loop (the MCP server),
    in a fresh thread, since runs do not nest."""
    import trio

    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return trio.run(function)
    outcome: dict[str, Any] = {}

    def _target() -> None:
        try:
            outcome["value"] = trio.run(function)
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=_target, name="actors-codex-delivery")
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]

"""JSON-RPC with a Codex app-server, under trio, over its three transports.

Codex's app-server speaks JSON-RPC 2.0 without the `jsonrpc` field, one message per
WebSocket text frame on `--listen unix://PATH` (WebSocket over a Unix socket; PATH is a
symlink to the real socket) or `ws://IP:PORT`, and one message per line on stdio (an
app-server we start ourselves). The WebSocket side uses websockets' Sans-I/O protocol
fed by a trio stream, because its asyncio client cannot run under trio.

`connect(...)` yields a `CodexConnection`: `request()` waits for the answer with the same
id, `notify()` sends a notification, and every server notification is kept in order for
`wait_for()`. Server requests (approvals) are kept in `server_requests` and never
answered here: Codex sends a thread's approval requests to every client subscribed to
it, so the user's own client (the TUI) answers them, and any answer from a delivering
connection would be taken as the user's (an error reply reads as "declined").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import trio

from runtime.core.bounded_json import decode

MAX_MESSAGE = 16 * 1024 * 1024  # the app-server's x-codex-websocket-max-unfragmented-message-bytes


class CodexError(Exception):
    """A JSON-RPC error answer (`code`, `message`) or a broken transport (`code` None)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class _Transport(Protocol):
    async def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def aclose(self) -> None: ...


class _WebSocket:
    """One WebSocket client connection over a trio byte stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        from websockets.client import ClientProtocol
        from websockets.uri import parse_uri

        self._stream = stream
        self._protocol = ClientProtocol(parse_uri("ws://localhost/"), max_size=MAX_MESSAGE)
        self._pending: list[Any] = []
        self._fragments: list[bytes] = []
        self._send_lock = trio.Lock()

    async def handshake(self) -> None:
        from websockets.http11 import Response

        self._protocol.send_request(self._protocol.connect())
        await self._flush()
        while True:
            events = await self._events()
            if events is None:
                raise CodexError("the app-server closed the connection during the handshake")
            for event in events:
                if isinstance(event, Response):
                    if self._protocol.handshake_exc is not None:
                        raise CodexError(
                            f"WebSocket handshake refused: {self._protocol.handshake_exc}"
                        )
                else:
                    self._pending.append(event)
            if self._protocol.state.name == "OPEN":
                return

    async def _flush(self) -> None:
        async with self._send_lock:
            for data in self._protocol.data_to_send():
                if data:
                    await self._stream.send_all(data)

    async def _events(self) -> list[Any] | None:
        data = await self._stream.receive_some(65536)
        if not data:
            self._protocol.receive_eof()
            await self._flush()
            return None
        self._protocol.receive_data(data)
        await self._flush()  # pongs and close answers
        return list(self._protocol.events_received())

    async def send(self, message: dict[str, Any]) -> None:
        self._protocol.send_text(json.dumps(message).encode())
        await self._flush()

    async def receive(self) -> dict[str, Any] | None:
        from websockets.frames import Opcode

        while True:
            while self._pending:
                frame = self._pending.pop(0)
                if frame.opcode in (Opcode.TEXT, Opcode.CONT, Opcode.BINARY):
                    self._fragments.append(frame.data)
                    if frame.fin:
                        raw, self._fragments = b"".join(self._fragments), []
                        return dict(decode(raw))
                elif frame.opcode == Opcode.CLOSE:
                    return None
            events = await self._events()
            if events is None:
                return None
            self._pending.extend(events)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            self._protocol.send_close()
            await self._flush()
        await self._stream.aclose()


class _Stdio:
    """An app-server we started: one JSON message per line on its stdin / stdout."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any] | None:
        while b"\n" not in self._buffer:
            data = await self._stdout.receive_some(65536)
            if not data:
                return None
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return dict(decode(line)) if line.strip() else await self.receive()

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._stdin.aclose()
        with trio.move_on_after(5):
            await self._process.wait()
        if self._process.returncode is None:
            self._process.kill()
            await self._process.wait()


class CodexConnection:
    def __init__(self, transport: _Transport) -> None:
        self._transport = transport
        self._next_id = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._answered: dict[int, trio.Event] = {}
        self._notified = trio.Event()
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.closed: str | None = None

    async def _read_loop(self) -> None:
        try:
            while (message := await self._transport.receive()) is not None:
                await self._dispatch(message)
            self.closed = "the app-server closed the connection"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.closed = f"the app-server connection broke: {type(exc).__name__}"
        finally:
            for event in self._answered.values():
                event.set()
            self._notified.set()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:  # a server request: not ours to answer
            self.server_requests.append(message)
            self._notified.set()
            self._notified = trio.Event()
        elif "id" in message:
            ident = message["id"]
            if isinstance(ident, int) and ident in self._answered:
                self._answers[ident] = message
                self._answered[ident].set()
        elif "method" in message:
            self.notifications.append(message)
            self._notified.set()
            self._notified = trio.Event()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self._answered[ident] = trio.Event()
        message: dict[str, Any] = {"id": ident, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._transport.send(message)
            await self._answered[ident].wait()
        finally:
            done = self._answered.pop(ident)
        answer = self._answers.pop(ident, None)
        if answer is None or not done.is_set():
            raise CodexError(self.closed or "no answer from the app-server")
        if "error" in answer:
            error = answer["error"] or {}
            raise CodexError(str(error.get("message", error)), error.get("code"))
        return dict(answer.get("result") or {})

    async def answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        """Answer a server request (a client that owns the thread: the user's, a test's)."""
        await self._transport.send({"id": request["id"], "result": result})

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self._transport.send(message)

    async def wait_for(
        self, match: Callable[[dict[str, Any]], bool], timeout: float, start: int = 0
    ) -> dict[str, Any] | None:
        """The first notification from index `start` on that matches, or None at timeout
        (or when the connection closed)."""
        with trio.move_on_after(timeout if timeout > 0 else 0):
            seen = start
            while True:
                for note in self.notifications[seen:]:
                    if match(note):
                        return note
                seen = len(self.notifications)
                if self.closed is not None:
                    return None
                await self._notified.wait()
        return None

    async def initialize(self, name: str = "actors", version: str = "0") -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {"clientInfo": {"name": name, "title": "actors delivery", "version": version}},
        )
        await self.notify("initialized")
        return result


@contextlib.asynccontextmanager
async def connect(
    *,
    socket: str | None = None,
    url: str | None = None,
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[CodexConnection]:
    """Connect to an app-server's Unix socket, its ws:// URL, or start one (`command`,
    stdio). Raises CodexError when it cannot be reached."""
    transport: _Transport
    try:
        if socket is not None:
            transport = await _open_ws(await _ours(await trio.open_unix_socket(socket)))
        elif url is not None:
            host, port = _host_port(url)
            transport = await _open_ws(await _ours(await trio.open_tcp_stream(host, port)))
        elif command is not None:
            import subprocess

            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            transport = _Stdio(process)
        else:
            raise CodexError("give a socket, a ws:// url or a command")
    except OSError as exc:
        where = socket or url or " ".join(command or [])
        raise CodexError(f"codex app-server {where} unreachable: {exc.strerror or exc}") from None
    connection = CodexConnection(transport)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection._read_loop)
            try:
                yield connection
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the caller's own error, not a group of ours
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        with trio.CancelScope(shield=True):
            await transport.aclose()


async def _ours(stream: trio.SocketStream) -> trio.SocketStream:
    """`stream`, unless its far end is another user's process (a socket path or port taken
    over after the app-server exited): then closed before anything is sent to it."""
    from typing import cast

    from runtime.core.listeners import foreign_peer

    owner = foreign_peer(cast("Any", stream.socket))
    if owner is None:
        return stream
    await stream.aclose()
    whose = "a local socket the kernel does not name" if owner == -1 else f"uid {owner}"
    raise CodexError(f"the app-server's socket is held by {whose}, not you; nothing was sent")


async def _open_ws(stream: trio.abc.Stream) -> _WebSocket:
    socket = _WebSocket(stream)
    try:
        with trio.fail_after(10):
            await socket.handshake()
    except BaseException:
        await stream.aclose()
        raise
    return socket


def _host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "ws" or not parts.hostname or parts.port is None:
        raise CodexError(f"codex url must look like ws://127.0.0.1:PORT, not {url!r}")
    return parts.hostname, parts.port


__all__ = ["MAX_MESSAGE", "CodexConnection", "CodexError", "connect"]

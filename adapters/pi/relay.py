"""The relay inside `adapters.pi.host`: pi's JSONL stdio shared by any number of socket
clients, each line routed whole.

- Commands: each client writes JSONL; every line is relayed to pi's stdin whole (one
  writer at a time, so two clients' lines never interleave). Its `id` is replaced by a
  host-unique one (`c<connection>.<n>`) and restored on pi's response, which goes only to
  the client that sent the command (a command without an id gets its response too, still
  without one). `extension_ui_response` lines keep their id: it is pi's own.
- Events (pi lines without a routed id) go to every connected client. A new client first
  gets the last `queue_update` pi emitted (if any), so it can see which steer / follow-up
  texts are still waiting in pi's memory; that is how the adapter avoids queueing a
  retried delivery twice.
- Framing is strict JSONL: pi's output is split on "\\n" only (U+2028 is legal inside
  JSON strings), a trailing "\\r" from a client is dropped, and a client line that is not
  a JSON object is answered with an error response instead of reaching pi.
- Prompts pass one at a time: a `prompt` is held until pi has answered the previous
  one (see `Relay._close_gate`: without this, two prompts sent to an idle pi at the same
  moment are both answered success and one of them silently vanishes).
- A client that stops reading is disconnected once CLIENT_BUFFER_LINES lines wait for it,
  so a stuck client can never stall pi's stdout (and with it the agent).
- A client that half-closes (EOF) still gets the responses it is owed, then is closed,
  so `printf '{"type":"get_state"}\\n' | socat - UNIX-CONNECT:PATH` works.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

import trio

from runtime.core.bounded_json import decode

CLIENT_BUFFER_LINES = 10_000
MAX_CLIENT_LINE_BYTES = 64 * 1024 * 1024
"""A client line longer than this (no newline yet) is refused: one client must not exhaust
the host's memory. Large enough for images sent as base64."""
PROMPT_GATE_S = 30.0
"""Longest a prompt waits for pi's answer to the previous one (pi answers after its
preflight, which may include compacting the context)."""
_NO_ID = object()
"""Route marker: the client sent its command without an id, so the response has none."""


class _Lines:
    """Split a byte stream into records on b"\\n" only (never on U+2028 / U+2029)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        self._buffer += data
        lines: list[bytes] = []
        while (cut := self._buffer.find(b"\n", self._scanned)) >= 0:
            lines.append(bytes(self._buffer[:cut]))
            del self._buffer[: cut + 1]
            self._scanned = 0
        self._scanned = len(self._buffer)  # a long line is scanned once, not per chunk
        return lines

    @property
    def pending(self) -> int:
        return len(self._buffer)


@dataclass(eq=False)
class _Client:
    number: int
    outbox: trio.MemorySendChannel[bytes]
    connection: trio.CancelScope = field(default_factory=trio.CancelScope)
    outstanding: int = 0
    eof: bool = False
    closed: bool = False

    def put(self, data: bytes) -> None:
        """Queue a line for this client; drop the client rather than block pi's output."""
        if self.closed:
            return
        try:
            self.outbox.send_nowait(data)
        except trio.WouldBlock:
            print(f"pi_host: client {self.number} stopped reading; dropped", file=sys.stderr)
            self.close()
            self.connection.cancel()  # hang up now, without flushing to a stuck reader
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed = True

    def close(self) -> None:
        """Stop taking lines; the writer task flushes what is queued, then hangs up."""
        if not self.closed:
            self.closed = True
            self.outbox.close()


def _dump(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class Relay:
    """pi's stdin and stdout on one side, the socket clients on the other: every line
    routed as the module docstring says."""

    def __init__(self, stdin: trio.abc.SendStream) -> None:
        self._stdin = stdin
        self._write_lock = trio.Lock()
        self._clients: set[_Client] = set()
        self._routes: dict[str, tuple[_Client, object]] = {}
        self._connections = 0
        self._sequence = 0
        self._last_queue: bytes | None = None
        self._prompt_gate: tuple[str, trio.Event] | None = None

    # -- pi -> clients ---------------------------------------------------------------
    async def pump_pi(self, stdout: trio.abc.ReceiveStream) -> None:
        """Route every pi line until pi closes its stdout."""
        lines = _Lines()
        while data := await stdout.receive_some(1 << 16):
            for line in lines.feed(data):
                self._route(line)

    def _route(self, line: bytes) -> None:
        try:
            message = decode(line)
        except ValueError:
            # not protocol: keep it visible to a person, out of every client's stream
            sys.stderr.buffer.write(b"pi_host: pi stdout (not JSON): " + line[:2000] + b"\n")
            sys.stderr.flush()
            return
        if isinstance(message, dict) and message.get("type") == "response":
            host_id = str(message.get("id"))
            self._open_gate(host_id)
            route = self._routes.pop(host_id, None)
            if route is not None:
                client, original = route
                if original is _NO_ID:
                    message.pop("id", None)
                else:
                    message["id"] = original
                client.outstanding -= 1
                client.put(_dump(message))
                if client.eof and client.outstanding == 0:
                    client.close()
                return
        if isinstance(message, dict) and message.get("type") == "queue_update":
            self._last_queue = line + b"\n"
        for client in list(self._clients):
            client.put(line + b"\n")

    # -- clients -> pi ---------------------------------------------------------------
    async def serve_client(self, stream: trio.SocketStream) -> None:
        self._connections += 1
        outbox, pending = trio.open_memory_channel[bytes](CLIENT_BUFFER_LINES)
        client = _Client(self._connections, outbox)
        self._clients.add(client)
        if self._last_queue is not None:
            client.put(self._last_queue)
        try:
            with client.connection:
                async with trio.open_nursery() as nursery:

                    async def write() -> None:
                        with contextlib.suppress(
                            trio.BrokenResourceError, trio.ClosedResourceError
                        ):
                            async for data in pending:
                                await stream.send_all(data)
                        nursery.cancel_scope.cancel()  # closed, or the peer went away

                    nursery.start_soon(write)
                    await self._read_commands(client, stream)
                    client.eof = True
                    if client.outstanding == 0:
                        client.close()
        finally:
            self._clients.discard(client)
            client.close()
            pending.close()
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async def _read_commands(self, client: _Client, stream: trio.SocketStream) -> None:
        lines = _Lines()
        while True:
            try:
                data = await stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for line in lines.feed(data):
                await self._forward(client, line.removesuffix(b"\r"))
            if lines.pending > MAX_CLIENT_LINE_BYTES:
                client.put(_error("parse", f"line longer than {MAX_CLIENT_LINE_BYTES} bytes"))
                return

    async def _forward(self, client: _Client, line: bytes) -> None:
        if not line.strip():
            return
        try:
            command = decode(line)
        except ValueError as exc:
            client.put(_error("parse", f"Failed to parse command: {exc}"))
            return
        if not isinstance(command, dict):
            client.put(_error("parse", "a command must be a JSON object"))
            return
        if command.get("type") != "extension_ui_response":
            self._sequence += 1
            host_id = f"c{client.number}.{self._sequence}"
            if command.get("type") == "prompt":
                await self._close_gate(host_id)
            self._routes[host_id] = (client, command.get("id", _NO_ID))
            command["id"] = host_id
            client.outstanding += 1
        async with self._write_lock:
            await self._stdin.send_all(_dump(command))

    async def _close_gate(self, host_id: str) -> None:
        """Hold a prompt until pi has answered the previous one, then let it through.

        pi checks "is the agent busy?" when a prompt arrives but only becomes busy after
        the prompt's preflight, which awaits; a second prompt arriving in between passes
        the check too, is answered success, and is then dropped without a trace (pi
        0.73.1: its `agent.prompt` throws "already processing" after the success response
        was sent). pi marks itself busy in the same tick in which it writes the response,
        so a prompt sent after that response is queued (with `streamingBehavior`) or
        rejected (without), never lost."""
        while (previous := self._prompt_gate) is not None:
            with trio.move_on_after(PROMPT_GATE_S):
                await previous[1].wait()
            if self._prompt_gate is previous:  # pi never answered it: stop holding everyone
                self._prompt_gate = None
        self._prompt_gate = (host_id, trio.Event())

    def _open_gate(self, host_id: str) -> None:
        if self._prompt_gate is not None and self._prompt_gate[0] == host_id:
            self._prompt_gate[1].set()
            self._prompt_gate = None


def _error(command: str, text: str) -> bytes:
    return _dump({"type": "response", "command": command, "success": False, "error": text})

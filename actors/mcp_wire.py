"""The MCP server's stdio wire: every JSON-RPC request a client sends gets a response.

The mcp SDK's stdio transport drops a line it cannot take (a lone surrogate such as
`"\\ud800"`, invalid UTF-8, a `params` that is not an object, an id that is neither an
integer nor a string) without answering it, and cancels the requests still in flight
when stdin closes. This wire sits under `mcp.server.stdio.stdio_server` (as its explicit
stdin and stdout): it reads stdin itself, answers a line it refuses with a JSON-RPC
error that names the problem (to the request's id when one can be recovered, else to
`null`), passes every other line on unchanged, and at end of input waits until each
request it passed on has been answered before letting the server stop.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from typing import IO, Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from runtime.core.bounded_json import MAX_DEPTH, too_deep

MAX_LINE = 16 * 1024 * 1024  # one request line; larger values belong in a file
DRAIN_S = 300.0  # how long requests still in flight at end of input may take
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_HEAD = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"]*"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)
_TOO_LONG = object()


class Refusal(Exception):
    """A line the server will not pass on: answer each of `ids` with this error."""

    def __init__(self, ids: list[Any], code: int, message: str) -> None:
        super().__init__(message)
        self.ids, self.code, self.message = ids, code, message


def _head_id(head: bytes) -> list[Any]:
    """The id of a request line that cannot be parsed, read from its first bytes
    (`{"jsonrpc": "2.0", "id": ...` as every client writes it); else null."""
    found = _HEAD.match(head[:4096])
    return [json.loads(found.group(1))] if found else [None]


def _lone_surrogate(item: Any, where: str) -> str | None:
    """Where in a parsed message a string (or key) holds a lone surrogate, if anywhere."""
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(item, dict):
        for key, value in item.items():
            found = _lone_surrogate(key, where) or _lone_surrogate(value, f"{where}.{key}")
            if found:
                return found
    if isinstance(item, list):
        for index, value in enumerate(item):
            found = _lone_surrogate(value, f"{where}[{index}]")
            if found:
                return found
    return None


def _request_id(message: dict[str, Any]) -> Any:
    """The id to answer a request with: its own when it is a valid one, else null."""
    ident = message.get("id")
    return ident if isinstance(ident, int | float | str) and not isinstance(ident, bool) else None


def _check_message(message: Any, text: str) -> Any:
    """The id a request is owed an answer under (None for a notification or a response),
    or Refusal."""
    if not isinstance(message, dict):
        raise Refusal([None], INVALID_REQUEST, "a JSON-RPC message must be a JSON object")
    request = "method" in message and "id" in message
    ids = [_request_id(message)] if request else []
    where = _lone_surrogate(message, "message")
    if where is not None:
        code = INVALID_PARAMS if where.startswith("message.params") else INVALID_REQUEST
        raise Refusal(
            ids, code, f"{where} holds a lone surrogate (like \\ud800); send UTF-8 text only"
        )
    if request and not isinstance(ids[0], int | str):
        raise Refusal(ids, INVALID_REQUEST, "a request id must be an integer or a string")
    from mcp.types import jsonrpc_message_adapter

    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"][1:]) or "message"
        raise Refusal(
            ids, INVALID_REQUEST, f"invalid JSON-RPC message: {loc}: {first['msg']}"
        ) from None
    return ids[0] if request else None


def judge(raw: bytes) -> tuple[str, Any]:
    """(the line as text, the id its answer will carry or None) for a line to pass on;
    Refusal for one to answer here."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(
            _head_id(raw),
            PARSE_ERROR,
            f"the line is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start});"
            " send UTF-8 text",
        ) from None
    try:
        message = json.loads(text.rstrip("\r\n"))
    except (ValueError, RecursionError) as exc:
        raise Refusal(_head_id(raw), PARSE_ERROR, f"the line is not JSON ({exc})") from None
    if too_deep(message, MAX_DEPTH):  # parsed, but past what anything after us walks
        raise Refusal(_head_id(raw), PARSE_ERROR, "the message is nested too deeply")
    if isinstance(message, list):
        ids = [_request_id(m) for m in message if isinstance(m, dict) and "method" in m]
        raise Refusal(
            ids or [None], INVALID_REQUEST, "batches are not supported; send one message a line"
        )
    try:
        return text, _check_message(message, text)
    except RecursionError:
        raise Refusal(_head_id(raw), PARSE_ERROR, "the message is nested too deeply") from None


class Wire:
    """The server's stdin (an async iterator of lines) and stdout (`write` / `flush`)."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self._in: IO[bytes] = os.fdopen(fd_in, "rb", closefd=False)
        self._out = fd_out
        self._lock = anyio.Lock()
        self._pending: set[Any] = set()
        self._changed = anyio.Event()
        self._head = b""
        self.answered: dict[Any, Callable[[bool], None]] = {}
        """Request id -> called once its answer is written (True: a result) or could not
        be (False): what a request changes only once the client has it (inbox_read
        marks follow-ups read here)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            raw = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if raw is None:
                break
            try:
                if raw is _TOO_LONG:
                    raise Refusal(
                        _head_id(self._head),
                        INVALID_REQUEST,
                        f"the request line is over {MAX_LINE} bytes;"
                        " pass large values as files (a path) instead",
                    )
                if not raw.strip():
                    continue
                text, ident = judge(raw)
            except Refusal as refusal:
                await self._refuse(refusal)
                continue
            cancelled = self._track(text, ident)
            if cancelled is not None:  # owed nothing: what it took goes back
                await self._answered([(cancelled, False)], written=False)
            yield text
        with anyio.move_on_after(DRAIN_S):
            while self._pending:
                self._changed = anyio.Event()
                await self._changed.wait()

    def _read_line(self) -> Any:
        line = self._in.readline(MAX_LINE + 1)
        if not line:
            return None
        if len(line) <= MAX_LINE or line.endswith(b"\n"):
            return line
        self._head = line[:4096]
        while line and not line.endswith(b"\n"):  # skip the rest of the line
            line = self._in.readline(1 << 20)
        return _TOO_LONG

    def _track(self, text: str, ident: Any) -> Any:
        """Note a request owed an answer; the id of one the client cancelled, if any."""
        if ident is not None:
            self._pending.add(ident)
        elif '"notifications/cancelled"' in text:  # a cancelled request is owed nothing
            params = json.loads(text).get("params") or {}
            cancelled = params.get("requestId") if isinstance(params, dict) else None
            self._settle(cancelled)
            return cancelled
        return None

    def _settle(self, ident: Any) -> None:
        self._pending.discard(ident)
        self._changed.set()

    async def _refuse(self, refusal: Refusal) -> None:
        print(f"actors mcp: refused a message: {refusal.message}", file=sys.stderr)
        for ident in refusal.ids:
            error = {"code": refusal.code, "message": refusal.message}
            await self.write(json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}) + "\n")

    async def write(self, text: str) -> None:
        """Write whole lines to the client, noting which requests they answer."""
        answers: list[tuple[Any, bool]] = []
        for line in text.splitlines():
            if line.startswith("{") and ('"result"' in line or '"error"' in line):
                try:
                    sent = json.loads(line)
                except ValueError:
                    continue
                if isinstance(sent, dict) and ("result" in sent or "error" in sent):
                    self._settle(sent.get("id"))
                    result = sent.get("result")
                    answers.append((sent.get("id"), isinstance(result, dict)
                                    and not result.get("isError")))  # fmt: skip
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # never put invalid UTF-8 on the wire
            data = text.encode("utf-8", "replace")
        async with self._lock:
            try:
                await anyio.to_thread.run_sync(self._write_all, data)
            except BaseException:
                await self._answered(answers, written=False)
                raise
        await self._answered(answers, written=True)

    async def _answered(self, answers: list[tuple[Any, bool]], *, written: bool) -> None:
        for ident, ok in answers:
            then = self.answered.pop(ident, None)
            if then is None:
                continue
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(then, written and ok)
                except Exception as exc:  # the answer is out; what it settles is logged
                    print(f"actors mcp: after answering {ident!r}: {exc}", file=sys.stderr)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view) :]

    async def flush(self) -> None:
        return None


def claim_stdio() -> tuple[int, int]:
    """Take fds 0 and 1 for the wire: the server reads and writes private copies, fd 0
    becomes /dev/null and fd 1 stderr, so no stray read or print touches the protocol."""
    wire_in, wire_out = os.dup(0), os.dup(1)  # not inherited by the runners we start
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out

"""The few ASGI pieces the dashboard needs: a request as read from its scope, and the
responses it sends (JSON, a file, a plain error, a redirect), each with the headers every
answer carries.

Hypercorn parses HTTP; this module only reads the parsed scope and writes ASGI events.
Every answer forbids caching and framing, sends no Referer (the first URL holds the
token) and, for the page, a Content-Security-Policy that runs only the dashboard's own
script: a run-written text that reached the page as markup still could not execute.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MAX_BODY = 64 * 1024
"""The largest request body read (an action's JSON)."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COMMON = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CSP.encode()),
]


class BodyTooLarge(Exception):
    pass


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    receive: Receive
    send: Send
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> Request:
        raw = scope.get("query_string") or b""
        query = {k: v[-1] for k, v in parse_qs(raw.decode("latin-1")).items()}
        return cls(str(scope["method"]), str(scope["path"]), query, headers, receive, send)

    async def body(self) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks)


async def respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                *_COMMON,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, data: Any, status: int = 200) -> None:
    body = json.dumps(data, ensure_ascii=False, default=str).encode()
    await respond(send, status, body, "application/json; charset=utf-8")


async def send_error(send: Send, status: int, message: str, **extra: Any) -> None:
    """An error as one JSON line the page shows as text: `{"error": ..., ...}`."""
    await send_json(send, {"error": message, **extra}, status)


async def redirect(send: Send, to: str, headers: list[tuple[bytes, bytes]]) -> None:
    await respond(send, 303, b"", "text/plain", [(b"location", to.encode()), *headers])


async def start_stream(send: Send) -> None:
    """The head of a server-sent event stream."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), *_COMMON],
        }
    )


async def send_event(send: Send, name: str, data: Any) -> None:
    payload = json.dumps(data, ensure_ascii=False, default=str)
    frame = f"event: {name}\ndata: {payload}\n\n".encode()
    await send({"type": "http.response.body", "body": frame, "more_body": True})

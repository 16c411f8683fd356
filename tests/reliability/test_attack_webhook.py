"""Issue 17 #14: webhook signatures cover only the body.

`X-Actors-Signature: sha256=HMAC(secret, body)`: the delivery id and the attempt are
unsigned, and nothing dates the request, so a captured request replays forever (and its
body can be resent under any delivery id). Expected: a signed timestamp, delivery id and
body, in a `t=...,v1=...` style header.

A real HTTP server on loopback receives the follow-ups of real runs.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import re
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished

SECRET = "whsec-attack-0123456789"


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def _one_delivery(
    url: str, received: list[tuple[dict[str, str], bytes]]
) -> tuple[dict[str, str], bytes]:
    reg = cli("session", "register", "--harness", "webhook", "--id", "wh",
              "-o", f"url={url}", "-o", f"secret={SECRET}")  # fmt: skip
    assert reg.returncode == 0, reg.stderr
    finished(actors.spawn("hello", session="wh"))
    assert received, "the webhook received nothing"
    return received[0]


def _signature_header(headers: dict[str, str]) -> str:
    found = [v for k, v in headers.items() if "signature" in k]
    assert found, f"no signature header in {sorted(headers)}"
    return found[0]


def test_the_signature_header_carries_a_signed_timestamp(
    home: StateRoot, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]
) -> None:
    headers, _body = _one_delivery(*receiver)
    value = _signature_header(headers)
    stamp = re.search(r"\bt=(\d+)", value)
    assert stamp and re.search(r"\bv1=[0-9a-f]{64}\b", value), f"signature header {value!r}"
    assert abs(int(stamp.group(1)) - time.time()) < 300


def test_the_signature_is_not_over_the_body_alone(
    home: StateRoot, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]
) -> None:
    headers, body = _one_delivery(*receiver)
    value = _signature_header(headers)
    body_only = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert body_only not in value, (
        "the signature covers the body only: the same request verifies under any delivery "
        "id, attempt or time"
    )

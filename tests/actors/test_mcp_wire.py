"""Issue 17 #11: every JSON-RPC request sent to `actors mcp` gets a response, and a bad
one never stops the server from answering the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.mcp_wire import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, Refusal, judge
from runtime.store.layout import StateRoot

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "wire", "version": "1"},
    },
}
PING = b'{"jsonrpc":"2.0","id":8,"method":"ping"}'


def serve(*lines: bytes) -> tuple[dict[Any, dict[str, Any]], str]:
    """Feed the server these raw lines after the handshake, then close its stdin; the
    answers by id (every one must be valid UTF-8 JSON) and its stderr."""
    head = [json.dumps(INIT).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    proc = subprocess.run(
        [sys.executable, "-m", "actors", "mcp", "--session", "coord-wire"],
        input=b"\n".join([*head, *lines]) + b"\n",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    answers: dict[Any, dict[str, Any]] = {}
    for line in proc.stdout.decode("utf-8").splitlines():
        message = json.loads(line)
        if "id" in message:
            answers[message["id"]] = message
    return answers, proc.stderr.decode(errors="replace")


def error_of(answers: dict[Any, dict[str, Any]], ident: Any) -> dict[str, Any]:
    assert ident in answers, f"request {ident!r} got no response: {answers}"
    error: dict[str, Any] = answers[ident]["error"]
    return error


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        (
            b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\xff\xfe"}}',
            PARSE_ERROR,
            "UTF-8",
        ),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":[1, 2]}', INVALID_REQUEST, "params"),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}', INVALID_REQUEST, "params"),
        (b'{"jsonrpc":"2.0","id":7,"method":"ping"', PARSE_ERROR, "not JSON"),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}', INVALID_REQUEST, "jsonrpc"),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', INVALID_REQUEST, "method"),
        (b'[{"jsonrpc":"2.0","id":7,"method":"ping"}]', INVALID_REQUEST, "batches"),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":'
            + b"[" * 50_000
            + b"]" * 50_000
            + b"}}",
            PARSE_ERROR,
            "",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"spawn","arguments":{"template":"echo '
            + b"x" * (17 * 1024 * 1024)
            + b'"}}}',
            INVALID_REQUEST,
            "over 16777216 bytes",
        ),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"spawn","arguments":{"\\udcff":"x"}}}',
            INVALID_PARAMS,
            "lone surrogate",
        ),
    ],
    ids=[
        "invalid-utf8",
        "array-params",
        "string-params",
        "truncated-json",
        "jsonrpc-1.0",
        "method-not-a-string",
        "batch",
        "nested-too-deep",
        "line-over-16MiB",
        "surrogate-key",
    ],
)
def test_a_request_the_server_cannot_take_is_answered_with_an_error(
    home: StateRoot, line: bytes, code: int, needle: str
) -> None:
    answers, stderr = serve(line, PING)
    error = error_of(answers, 7)
    assert error["code"] == code and needle in error["message"], error
    assert answers[8]["result"] == {}, "the server stopped answering"
    assert "Traceback" not in stderr
    assert not home.runs.exists() or os.listdir(home.runs) == []


@pytest.mark.parametrize(
    ("ident", "line"),
    [
        (1.5, b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}'),
        (None, b'{"jsonrpc":"2.0","id":true,"method":"ping"}'),
        (None, b'{"jsonrpc":"2.0","id":null,"method":"ping"}'),
        (None, b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}'),
        (None, b"\x00\x01 garbage"),
        ("abc", b'{"jsonrpc":"2.0","id":"abc","method":"ping","params":{"x":"\xc3"}}'),
    ],
    ids=["float-id", "bool-id", "null-id", "object-id", "garbage", "string-id-bad-utf8"],
)
def test_a_bad_id_or_an_unparseable_line_is_still_answered(
    home: StateRoot, ident: Any, line: bytes
) -> None:
    answers, _ = serve(line, PING)
    assert error_of(answers, ident)["code"] in (PARSE_ERROR, INVALID_REQUEST)
    assert answers[8]["result"] == {}


def test_a_notification_with_a_lone_surrogate_is_dropped_and_the_server_goes_on(
    home: StateRoot,
) -> None:
    answers, stderr = serve(
        b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\\ud800"}}', PING
    )
    assert set(answers) == {1, 8}
    assert "lone surrogate" in stderr


def test_requests_still_in_flight_when_stdin_closes_are_answered(home: StateRoot) -> None:
    calls = [
        {"name": "recipes", "arguments": {}},
        {"name": "inspect", "arguments": {"target": "run:ghost"}},
        {"name": "spawn", "arguments": {"template": "true", "as": "run:last-words"}},
        {"name": "inbox_read", "arguments": {}},
    ]
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": c}).encode()
        for i, c in enumerate(calls)
    ]
    answers, _ = serve(*lines, PING)  # stdin closes right after the last line
    assert set(answers) == {1, 8, 10, 11, 12, 13}
    assert answers[11]["result"]["isError"]
    assert answers[12]["result"]["structuredContent"]["run"] == "last-words"


def test_a_result_holding_an_undecodable_name_is_sent_as_valid_utf8(
    home: StateRoot, tmp_path: Path
) -> None:
    recipes = tmp_path / ".actors" / "recipes"  # the project recipes (cwd is tmp_path)
    recipes.mkdir(parents=True)
    fd = os.open(os.fsencode(recipes) + b"/bad\xff.json", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b'{"template": "true"}')
    os.close(fd)
    call = {"name": "recipes", "arguments": {}}
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call})
    answers, _ = serve(line.encode(), PING)
    found = answers[7]["result"]["structuredContent"]["recipes"]
    assert "bad\ufffd" in found or "bad?" in found, found
    assert answers[8]["result"] == {}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":7,"method":"ping\\ud800"}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"v":["ok","\\udfff"]}}}',
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    ],
    ids=["method", "list-item", "id"],
)
def test_judge_refuses_every_lone_surrogate_with_where_it_is(raw: bytes) -> None:
    with pytest.raises(Refusal) as caught:
        judge(raw)
    assert "lone surrogate" in caught.value.message
    assert len(caught.value.ids) == 1 and caught.value.ids[0] is not None


def test_judge_passes_a_good_request_through_unchanged() -> None:
    raw = b'{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","arguments":{"v":"\\u00e9"}}}\n'
    text, ident = judge(raw)
    assert text == raw.decode() and ident == "a-1"
    assert judge(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')[1] is None

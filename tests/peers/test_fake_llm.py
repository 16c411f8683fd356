"""The fake model server answers every API shape the harnesses use (no harness needed)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.peers.fake_llm import FakeLLM


@pytest.fixture
def llm() -> Iterator[tuple[FakeLLM, str]]:
    server = FakeLLM()
    port = server.start()
    yield server, f"http://127.0.0.1:{port}"
    server.stop()


def _events(response: httpx.Response) -> list[tuple[str | None, str]]:
    out, name = [], None
    for line in response.text.splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, line[6:]))
            name = None
    return out


def test_chat_completions_plain_and_streaming(llm: tuple[FakeLLM, str]) -> None:
    server, base = llm
    body = {
        "model": "echo",
        "messages": [
            {"role": "system", "content": "x"},
            {"role": "user", "content": "hi TOKEN-A1 and TOKEN-B2"},
        ],
    }
    plain = httpx.post(f"{base}/v1/chat/completions", json=body).json()
    assert plain["choices"][0]["message"]["content"] == "ACK TOKEN-A1 TOKEN-B2"
    stream = httpx.post(f"{base}/v1/chat/completions", json={**body, "stream": True})
    datas = [d for _, d in _events(stream)]
    assert datas[-1] == "[DONE]"
    text = "".join(json.loads(d)["choices"][0]["delta"].get("content", "") for d in datas[:-1])
    assert text == "ACK TOKEN-A1 TOKEN-B2"
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * 2


def test_responses_api_streaming(llm: tuple[FakeLLM, str]) -> None:
    _, base = llm
    body = {
        "model": "echo",
        "stream": True,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "go TOKEN-R3"}]}],
    }
    events = _events(httpx.post(f"{base}/v1/responses", json=body))
    names = [n for n, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    delta = next(json.loads(d) for n, d in events if n == "response.output_text.delta")
    assert delta["delta"] == "ACK TOKEN-R3"


def test_anthropic_messages_plain_and_streaming(llm: tuple[FakeLLM, str]) -> None:
    _, base = llm
    body = {
        "model": "claude",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "TOKEN-C4 please"}]}],
    }
    plain = httpx.post(f"{base}/v1/messages", json=body).json()
    assert plain["content"][0]["text"] == "ACK TOKEN-C4" and plain["stop_reason"] == "end_turn"
    events = _events(httpx.post(f"{base}/v1/messages", json={**body, "stream": True}))
    assert [n for n, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_slow_marker_keeps_a_turn_busy(llm: tuple[FakeLLM, str]) -> None:
    _, base = llm
    started = time.monotonic()
    reply = httpx.post(
        f"{base}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "[slow:0.5] TOKEN-S5"}]},
    ).json()
    assert time.monotonic() - started >= 0.5
    assert reply["choices"][0]["message"]["content"] == "ACK TOKEN-S5"

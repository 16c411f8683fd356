"""The fake model server answers every API shape the harnesses use (no harness needed)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

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


def test_tool_marker_makes_the_anthropic_reply_a_tool_call_then_ack(
    llm: tuple[FakeLLM, str],
) -> None:
    _, base = llm
    prompt = {"role": "user", "content": "run it [tool:Bash:echo hi] TOKEN-T1"}
    body = {"model": "claude", "max_tokens": 10, "messages": [prompt]}
    plain = httpx.post(f"{base}/v1/messages", json=body).json()
    assert plain["stop_reason"] == "tool_use"
    (call,) = plain["content"]
    assert call["type"] == "tool_use" and call["name"] == "Bash"
    assert call["input"]["command"] == "echo hi"

    events = _events(httpx.post(f"{base}/v1/messages", json={**body, "stream": True}))
    start = next(json.loads(d) for n, d in events if n == "content_block_start")
    delta = next(json.loads(d) for n, d in events if n == "content_block_delta")
    stop = next(json.loads(d) for n, d in events if n == "message_delta")
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["input"] == {}
    assert json.loads(delta["delta"]["partial_json"])["command"] == "echo hi"
    assert stop["delta"]["stop_reason"] == "tool_use"

    # two markers: two parallel calls; a JSON argument is the tool input as it is
    two = {**body, "messages": [{"role": "user", "content": '[tool:Bash:ls] [tool:Read:{"a": 1}]'}]}
    calls = httpx.post(f"{base}/v1/messages", json=two).json()["content"]
    assert [(c["name"], c["input"]) for c in calls][1] == ("Read", {"a": 1})
    assert len({c["id"] for c in calls}) == 2

    # the request carrying the tool result gets the usual ACK (of the result's text)
    result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "hi TOKEN-OUT"},
            {"type": "text", "text": "<system-reminder>TOKEN-CTX</system-reminder>"},
        ],
    }
    answer = {**body, "messages": [prompt, {"role": "assistant", "content": [call]}, result]}
    done = httpx.post(f"{base}/v1/messages", json=answer).json()
    assert done["stop_reason"] == "end_turn"
    assert done["content"] == [{"type": "text", "text": "ACK TOKEN-OUT TOKEN-CTX"}]


def test_tool_marker_makes_openai_replies_function_calls_then_ack(
    llm: tuple[FakeLLM, str],
) -> None:
    _, base = llm
    asked = {"role": "user", "content": '[tool:actors_spawn:{"template": "true"}] TOKEN-C'}
    chat = httpx.post(f"{base}/v1/chat/completions", json={"messages": [asked]}).json()
    (call,) = chat["choices"][0]["message"]["tool_calls"]
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert call["function"]["name"] == "actors_spawn"
    assert json.loads(call["function"]["arguments"]) == {"template": "true"}
    streamed = _events(
        httpx.post(f"{base}/v1/chat/completions", json={"messages": [asked], "stream": True})
    )
    first = json.loads(streamed[0][1])
    assert first["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "actors_spawn"
    answered = [asked, {"role": "assistant", "tool_calls": [call]}]
    answered.append({"role": "tool", "tool_call_id": call["id"], "content": "started"})
    done = httpx.post(f"{base}/v1/chat/completions", json={"messages": answered}).json()
    assert done["choices"][0]["message"]["content"] == "ACK TOKEN-C"

    # Responses: a namespaced call (Codex's MCP tools), then ACK after its output
    given = [
        {"role": "user", "content": [{"type": "input_text", "text": "[tool:mcp__a.spawn:{}]"}]}
    ]
    reply = httpx.post(f"{base}/v1/responses", json={"input": given}).json()
    (item,) = reply["output"]
    assert (item["type"], item["namespace"], item["name"]) == ("function_call", "mcp__a", "spawn")
    given += [item, {"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}]
    reply = httpx.post(f"{base}/v1/responses", json={"input": given}).json()
    assert reply["output"][0]["content"][0]["text"] == "ACK"


def test_gate_holds_a_reply_until_released_and_wait_request_sees_it(
    llm: tuple[FakeLLM, str],
) -> None:
    import threading

    server, base = llm
    replies: list[str] = []
    body = {"model": "c", "messages": [{"role": "user", "content": "[gate:g1] TOKEN-G"}]}

    def ask() -> None:
        replies.append(
            httpx.post(f"{base}/v1/messages", json=body, timeout=60).json()["content"][0]["text"]
        )

    asker = threading.Thread(target=ask)
    asker.start()
    seen = server.wait_request(lambda r: "TOKEN-G" in json.dumps(r["body"]), timeout=30)
    assert seen["path"] == "/v1/messages"
    assert replies == []  # held: the request is in, its answer is not
    server.release("g1")
    asker.join(timeout=30)
    assert replies == ["ACK TOKEN-G"]
    with pytest.raises(TimeoutError):
        server.wait_request(lambda r: False, timeout=0.05)


def test_gemini_generate_content_plain_and_streaming(llm: tuple[FakeLLM, str]) -> None:
    server, base = llm
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "context TOKEN-OLD"}]},
            {"role": "model", "parts": [{"text": "ACK TOKEN-OLD"}]},
            {"role": "user", "parts": [{"text": "<ctx/>"}, {"text": "now TOKEN-G5"}]},
        ],
        "generationConfig": {"temperature": 1},
    }
    model = f"{base}/v1beta/models/gemini-2.5-flash"
    plain = httpx.post(f"{model}:generateContent", json=body).json()
    (candidate,) = plain["candidates"]
    assert candidate["content"] == {"role": "model", "parts": [{"text": "ACK TOKEN-G5"}]}
    assert candidate["finishReason"] == "STOP" and plain["usageMetadata"]["totalTokenCount"] > 0
    stream = httpx.post(f"{model}:streamGenerateContent?alt=sse", json=body)
    assert stream.headers["content-type"] == "text/event-stream"
    (event,) = _events(stream)
    chunk = json.loads(event[1])
    assert chunk["candidates"][0]["content"]["parts"][0]["text"] == "ACK TOKEN-G5"
    assert server.prompts() == ["<ctx/>\nnow TOKEN-G5"] * 2


def test_tool_marker_makes_a_streamed_responses_reply_a_function_call(
    llm: tuple[FakeLLM, str],
) -> None:
    _, base = llm
    given = [{"role": "user", "content": [{"type": "input_text", "text": "[tool:shell:ls -la]"}]}]
    events = _events(httpx.post(f"{base}/v1/responses", json={"input": given, "stream": True}))
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed", names
    (done,) = [json.loads(d)["item"] for n, d in events if n == "response.output_item.done"]
    assert (done["type"], done["name"]) == ("function_call", "shell")
    assert json.loads(done["arguments"]) == {"command": "ls -la"}
    numbers = [json.loads(d)["sequence_number"] for _, d in events]
    assert numbers == sorted(set(numbers)), numbers


def _gemini_parts(reply: dict[str, Any]) -> list[dict[str, Any]]:
    (candidate,) = reply["candidates"]
    assert candidate["finishReason"] == "STOP"
    parts: list[dict[str, Any]] = candidate["content"]["parts"]
    return parts


@pytest.mark.parametrize("stream", [False, True], ids=["generateContent", "streamSSE"])
def test_tool_marker_makes_gemini_reply_function_calls_then_ack(
    llm: tuple[FakeLLM, str], stream: bool
) -> None:
    """`[tool:...]` is answered with `functionCall` parts (a shell command for
    run_shell_command, a JSON object as the args as it is); once a `functionResponse`
    came back, the same turn ends with the ACK."""
    _, base = llm
    model = f"{base}/v1beta/models/gemini-2.5-flash"
    url = f"{model}:streamGenerateContent?alt=sse" if stream else f"{model}:generateContent"

    def ask(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        response = httpx.post(url, json={"contents": contents})
        assert response.status_code == 200, response.text
        if not stream:
            return _gemini_parts(response.json())
        (event,) = _events(response)
        return _gemini_parts(json.loads(event[1]))

    prompt = (
        '[tool:run_shell_command:echo hi] [tool:mcp_actors_spawn:{"template": "true"}] TOKEN-GT'
    )
    asked = [{"role": "user", "parts": [{"text": prompt}]}]
    first, second = ask(asked)
    call, spawn = first["functionCall"], second["functionCall"]
    assert (call["name"], call["args"]) == ("run_shell_command", {"command": "echo hi"})
    assert (spawn["name"], spawn["args"]) == ("mcp_actors_spawn", {"template": "true"})
    answered = [
        *asked,
        {"role": "model", "parts": [first, second]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "run_shell_command", "response": {"output": "hi"}}},
                {"functionResponse": {"name": "mcp_actors_spawn", "response": {"ok": 1}}},
            ],
        },
    ]
    assert ask(answered) == [{"text": "ACK TOKEN-GT"}]
    plain = [{"role": "user", "parts": [{"text": "no tools TOKEN-GN"}]}]
    assert ask(plain) == [{"text": "ACK TOKEN-GN"}]

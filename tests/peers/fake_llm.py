"""A fake model server for the peers tier: loopback only, standard library only.

Speaks OpenAI Chat Completions (streaming and not), the OpenAI Responses API (streaming
and not), Anthropic Messages (streaming and not) and the Gemini API
(`/v1beta/models/MODEL:generateContent` and `:streamGenerateContent?alt=sse`), so every
harness can complete real turns offline. The reply to any request is `ACK <every TOKEN-... in the last user
message>` (or `ACK` alone), so a test can prove which text reached the model; a prompt
containing `[slow:N]` delays the reply N seconds, to keep a turn busy. On the Anthropic
Messages API a user prompt containing `[tool:NAME:ARG]` (one or more) is answered with
`tool_use` blocks instead (`Bash` gets `{"command": ARG}`; an ARG that is a JSON object is
the tool input as it is), so a real harness runs the tool; the request that carries the
tool results is answered with the usual ACK. The OpenAI Responses and Chat Completions
APIs answer the same marker with `function_call` items / `tool_calls` (`NS.NAME` gives
a Responses call a `namespace`, as Codex names MCP tools `mcp__SERVER` . `TOOL`; a NAME may
hold `-`, as Copilot names them `SERVER-TOOL`), and the
Gemini API with `functionCall` parts (`run_shell_command` gets `{"command": ARG}`). A prompt containing `[gate:NAME]` is held
unanswered until the test calls `release(NAME)` (a turn that stays busy exactly as long as
the test needs, with no timing guess). Every request body is kept in `requests` (and
appended to `--log FILE` when run as a program); `wait_request` waits for one.

    python -m tests.peers.fake_llm --port 0 --log /tmp/llm.jsonl   # prints "listening PORT"
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = re.compile(r"TOKEN-[A-Za-z0-9_-]+")
SLOW = re.compile(r"\[slow:(\d+(?:\.\d+)?)\]")
TOOL = re.compile(r"\[tool:([A-Za-z0-9_.-]+):([^\]]*)\]")
GATE = re.compile(r"\[gate:([A-Za-z0-9_-]+)\]")
GATE_TIMEOUT_S = 120.0
"""A gate never released still opens after this long (a failing test must not hang)."""


def _text_of(content: Any) -> str:
    """Text of a message's content in any of the three APIs' shapes."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or _text_of(part.get("content")) or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(p for p in parts if p)
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _text_of(message.get("content"))
    contents = body.get("contents")
    if isinstance(contents, list):  # Gemini: [{role, parts: [{text}]}]
        for content in reversed(contents):
            if isinstance(content, dict) and content.get("role") == "user":
                text = _text_of(content.get("parts"))
                if text:  # a user turn of only functionResponse parts carries no text
                    return text
    given = body.get("input")
    if isinstance(given, str):
        return given
    if isinstance(given, list):
        for item in reversed(given):
            if isinstance(item, dict) and item.get("role") == "user":
                return _text_of(item.get("content"))
    return ""


def tool_answers(body: dict[str, Any]) -> list[str]:
    """What each tool returned, as a harness sent it back over Chat Completions (the
    `tool` messages' content, as JSON text), oldest first."""
    messages = body.get("messages")
    return [
        json.dumps(m.get("content"))
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict) and m.get("role") == "tool"
    ]


def tool_calls_for(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool_use` blocks to answer with: one per `[tool:NAME:ARG]` in the last user
    message, unless that message carries tool results (then the turn ends with an ACK)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    last = next(
        (m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None
    )
    if last is None:
        return []
    content = last.get("content")
    if isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_result" for part in content
    ):
        return []
    calls = []
    for name, arg in TOOL.findall(_text_of(content)):
        try:
            given = json.loads(arg)
        except ValueError:
            given = None
        if isinstance(given, dict):
            tool_input = given
        else:
            tool_input = {"command": arg, "description": "fake model tool call"}
        calls.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:20]}",
                "name": name,
                "input": tool_input,
            }
        )
    return calls


def _marker_input(arg: str) -> dict[str, Any]:
    try:
        given = json.loads(arg)
    except ValueError:
        given = None
    return given if isinstance(given, dict) else {"command": arg}


def function_calls_for(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, name, arguments) to answer an OpenAI Responses or Chat Completions request
    with: one per `[tool:NAME:ARG]` in the last user message, unless tool results came
    after it (the request that carries them is answered with the usual ACK)."""
    items = body.get("input") if isinstance(body.get("input"), list) else body.get("messages")
    if not isinstance(items, list):
        return []
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output" or item.get("role") == "tool":
            return []
        if item.get("role") == "user":
            text = _text_of(item.get("content"))
            return [
                (f"call_{uuid.uuid4().hex[:16]}", name, _marker_input(arg))
                for name, arg in TOOL.findall(text)
            ]
    return []


def gemini_calls_for(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `functionCall` parts to answer a Gemini request with: one per `[tool:NAME:ARG]`
    in the last user turn that has text, unless a `functionResponse` came after it (the
    request that carries the results is answered with the usual ACK)."""
    contents = body.get("contents")
    if not isinstance(contents, list):
        return []
    for content in reversed(contents):
        if not isinstance(content, dict) or content.get("role") != "user":
            continue
        given = content.get("parts")
        parts: list[Any] = given if isinstance(given, list) else []
        if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
            return []
        text = _text_of(parts)
        if text:
            return [
                {"functionCall": {"id": f"call_{uuid.uuid4().hex[:16]}", "name": n, "args": a}}
                for n, a in ((name, _marker_input(arg)) for name, arg in TOOL.findall(text))
            ]
    return []


def reply_for(body: dict[str, Any]) -> tuple[str, float]:
    text = last_user_text(body)
    slow = SLOW.search(text)
    tokens = TOKEN.findall(text)
    return ("ACK " + " ".join(tokens)).strip(), float(slow.group(1)) if slow else 0.0


class FakeLLM:
    """The server plus its request log; start() returns the bound port."""

    def __init__(self, log: Path | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.log = log
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._gates: dict[str, threading.Event] = {}
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    def record(self, path: str, body: dict[str, Any]) -> None:
        entry = {"ts": time.time(), "path": path, "body": body}
        with self._lock:
            self.requests.append(entry)
            if self.log is not None:
                with open(self.log, "a") as handle:
                    handle.write(json.dumps(entry) + "\n")
            self._arrived.notify_all()

    def wait_request(
        self, predicate: Callable[[dict[str, Any]], bool], start: int = 0, timeout: float = 60
    ) -> dict[str, Any]:
        """The first request at index >= `start` matching `predicate` (woken by each
        arrival, no polling); TimeoutError when none comes in time."""
        deadline = time.monotonic() + timeout
        index = start
        with self._arrived:
            while True:
                while index < len(self.requests):
                    request = self.requests[index]
                    index += 1
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching model request within {timeout}s")
                self._arrived.wait(remaining)

    def gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        """Let the requests held by `[gate:NAME]` be answered (now and from now on)."""
        self.gate(name).set()

    def start(self, port: int = 0) -> int:
        handler = type("Handler", (_Handler,), {"llm": self})
        self.server = _Server(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = int(self.server.server_address[1])
        return self.port

    def stop(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def prompts(self) -> list[str]:
        return [last_user_text(r["body"]) for r in self.requests]


class _Server(ThreadingHTTPServer):
    """A harness that drops a stream it no longer wants (OpenCode aborts an SSE reply
    once it has what it needs) is normal here, not a server error to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    llm: FakeLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, code: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            chunk = (
                (f"event: {name}\n" if name else "")
                + "data: "
                + (data if isinstance(data, str) else json.dumps(data))
                + "\n\n"
            )
            self.wfile.write(chunk.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200,
                {"object": "list", "data": [{"id": "echo", "object": "model", "owned_by": "fake"}]},
            )
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        self.llm.record(self.path, body)
        text, delay = reply_for(body)
        for name in GATE.findall(last_user_text(body)):
            self.llm.gate(name).wait(GATE_TIMEOUT_S)
        if delay:
            time.sleep(delay)
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            self._chat(body, text)
        elif path.endswith("/responses"):
            self._responses(body, text)
        elif path.endswith("/messages"):
            self._anthropic(body, text)
        elif path.endswith(":streamGenerateContent"):
            self._sse([(None, self._gemini(text, gemini_calls_for(body)))])
        elif path.endswith(":generateContent"):
            self._json(200, self._gemini(text, gemini_calls_for(body)))
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _chat(self, body: dict[str, Any], text: str) -> None:
        ident, model, now = (
            f"chatcmpl-{uuid.uuid4().hex[:12]}",
            body.get("model", "echo"),
            int(time.time()),
        )
        usage = {
            "prompt_tokens": 10,
            "completion_tokens": len(text.split()),
            "total_tokens": 10 + len(text.split()),
        }
        calls = [
            {
                "id": ident_,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for ident_, name, args in function_calls_for(body)
        ]
        if calls:
            self._chat_tool_calls(body, ident, now, calls)
            return
        if not body.get("stream"):
            self._json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": now,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
            return

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": now,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        final = chunk({}, "stop")
        final["usage"] = usage
        self._sse(
            [
                (None, chunk({"role": "assistant", "content": ""}, None)),
                (None, chunk({"content": text}, None)),
                (None, final),
                (None, "[DONE]"),
            ]
        )

    def _chat_tool_calls(
        self, body: dict[str, Any], ident: str, now: int, calls: list[dict[str, Any]]
    ) -> None:
        model = body.get("model", "echo")
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": now,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                },
            )
            return
        base = {"id": ident, "object": "chat.completion.chunk", "created": now, "model": model}
        delta = {
            "role": "assistant",
            "tool_calls": [{"index": i, **c} for i, c in enumerate(calls)],
        }
        self._sse(
            [
                (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                (
                    None,
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                        "usage": usage,
                    },
                ),
                (None, "[DONE]"),
            ]
        )

    def _responses_tool_calls(
        self, body: dict[str, Any], calls: list[tuple[str, str, dict[str, Any]]]
    ) -> None:
        rid, model = f"resp_{uuid.uuid4().hex[:12]}", body.get("model", "echo")
        items = [
            {
                "id": f"fc_{uuid.uuid4().hex[:12]}",
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": name.rpartition(".")[2],
                **({"namespace": name.rpartition(".")[0]} if "." in name else {}),
                "arguments": json.dumps(args),
            }
            for call_id, name, args in calls
        ]
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 11,
        }
        done = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": items,
            "usage": usage,
        }
        if not body.get("stream"):
            self._json(200, done)
            return
        started = {**done, "status": "in_progress", "output": [], "usage": None}
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": started})
        ]
        for index, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {
                        "type": "response.output_item.added",
                        "output_index": index,
                        "item": {**item, "status": "in_progress", "arguments": ""},
                    },
                )
            )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        for number, (_, data) in enumerate(events):
            data["sequence_number"] = number
        self._sse(events)

    def _responses(self, body: dict[str, Any], text: str) -> None:
        calls = function_calls_for(body)
        if calls:
            self._responses_tool_calls(body, calls)
            return
        rid, mid, model = (
            f"resp_{uuid.uuid4().hex[:12]}",
            f"msg_{uuid.uuid4().hex[:12]}",
            body.get("model", "echo"),
        )
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {
            "id": mid,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": len(text.split()),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 10 + len(text.split()),
        }
        done = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": [item],
            "usage": usage,
        }
        if not body.get("stream"):
            self._json(200, done)
            return
        started = {**done, "status": "in_progress", "output": [], "usage": None}
        pending = {**item, "status": "in_progress", "content": []}
        events: list[tuple[str | None, Any]] = [
            (
                "response.created",
                {"type": "response.created", "sequence_number": 0, "response": started},
            ),
            (
                "response.in_progress",
                {"type": "response.in_progress", "sequence_number": 1, "response": started},
            ),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": 2,
                    "output_index": 0,
                    "item": pending,
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "sequence_number": 3,
                    "item_id": mid,
                    "output_index": 0,
                    "content_index": 0,
                    "part": {**part, "text": ""},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": 4,
                    "item_id": mid,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                },
            ),
            (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "sequence_number": 5,
                    "item_id": mid,
                    "output_index": 0,
                    "content_index": 0,
                    "text": text,
                },
            ),
            (
                "response.content_part.done",
                {
                    "type": "response.content_part.done",
                    "sequence_number": 6,
                    "item_id": mid,
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                },
            ),
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": 7,
                    "output_index": 0,
                    "item": item,
                },
            ),
            (
                "response.completed",
                {"type": "response.completed", "sequence_number": 8, "response": done},
            ),
        ]
        self._sse(events)

    def _gemini(self, text: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """One Gemini GenerateContentResponse (the whole reply; also the one SSE chunk):
        the ACK text, or the `functionCall` parts when the prompt scripted tool calls
        (Gemini ends a turn with finishReason STOP either way; the calls make it go on)."""
        words = len(text.split())
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": calls or [{"text": text}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": words,
                "totalTokenCount": 10 + words,
            },
            "modelVersion": "echo",
        }

    def _anthropic(self, body: dict[str, Any], text: str) -> None:
        mid, model = f"msg_{uuid.uuid4().hex[:12]}", body.get("model", "echo")
        calls = tool_calls_for(body)
        blocks: list[dict[str, Any]] = calls or [{"type": "text", "text": text}]
        stop_reason = "tool_use" if calls else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": len(text.split())}
        message = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self._json(200, message)
            return
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {**usage, "output_tokens": 0},
                    },
                },
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "tool_use":
                start = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            else:
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._sse(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    llm = FakeLLM(args.log)
    print(f"listening {llm.start(args.port)}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        llm.stop()


if __name__ == "__main__":
    main()

"""The coordinator loop through a real pi (RPC mode under adapters.pi.host, offline).

pi has no MCP client, so the model uses actors' CLI through pi's own `bash` tool (the
fake model answers `[tool:bash:COMMAND]` with a Chat Completions tool call, and pi runs
it). Set up exactly as docs/harnesses.md says for pi: pi started through
`adapters.pi.host`, the session registered with `--harness pi -o socket=...`, and
`ACTORS_SESSION` set where pi starts so what its shell spawns belongs to that session.
A run's follow-up wakes the idle pi (a new prompt through the host), the model reads it
there, and its next turn messages a live run, which acts on it (the run's outbox).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.conftest import register_session
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_pi import RpcClient, run_pi

SESSION = "pi-loop"


@pytest.fixture
def pi_socket(home: StateRoot, tmp_path: Path, fake_llm: FakeLLM) -> Iterator[Path]:
    with run_pi(tmp_path / "pi", fake_llm.port, env={"ACTORS_SESSION": SESSION}) as path:
        register_session("pi", SESSION, socket=str(path))
        yield path


def tool_outputs(body: dict[str, object]) -> list[str]:
    """What pi's tools returned, as pi sent it back to the model (role `tool`)."""
    messages = body.get("messages")
    assert isinstance(messages, list)
    return [json.dumps(m.get("content")) for m in messages if m.get("role") == "tool"]


def player_summaries(run: str) -> list[str]:
    view = json.loads(cli("inspect", f"run:{run}", "--view", "messages", "--json").stdout)
    return [m["summary"] for m in view["messages"] if m["type"] == "player.track"]


def turn(client: RpcClient, prompt: str, token: str) -> None:
    """One user turn (its prompt carries `token`), until pi's agent_end after it (an
    earlier turn may still be ending when the prompt is sent: pi_host queues it)."""
    assert client.request({"type": "prompt", "message": f"{prompt} {token}"})["success"]
    asked = client.wait_event("message_end", "user", token, timeout=90)
    while (end := client.wait_event("agent_end", timeout=90)) < asked:
        client.events[end] = {"type": "passed"}  # that earlier turn's end: look further


def test_spawn_wake_read_and_message_a_live_run_through_pis_shell(
    home: StateRoot, pi_socket: Path, fake_llm: FakeLLM
) -> None:
    with RpcClient(pi_socket) as client:
        # Turn 1: the model spawns two players through `actors spawn` in pi's bash tool.
        turn(
            client,
            "[tool:bash:actors spawn player --as run:pi1] "
            "[tool:bash:actors spawn player --as run:piplayer]",
            "TOKEN-PT1",
        )
    answered = fake_llm.wait_request(lambda r: bool(tool_outputs(r["body"])), timeout=30)
    outputs = tool_outputs(answered["body"])
    assert len(outputs) == 2 and all("run:pi" in o for o in outputs), outputs
    assert actors.status("pi1")["owner_id"] == SESSION
    assert actors.status("piplayer")["owner_id"] == SESSION

    # The turn is over and pi idle; the run ends, and its follow-up wakes pi.
    start = len(fake_llm.requests)
    actors.message("run:pi1", "player.stop", session=SESSION)
    finished(actors.status("pi1"))
    woke = fake_llm.wait_request(lambda r: "pi1" in last_user_text(r["body"]), start, 60)
    assert "[actors]" in last_user_text(woke["body"])
    assert "TOKEN-PT1" in json.dumps(woke["body"])  # the same conversation, woken
    assert cli("inbox", "read", "--session", SESSION).stdout == "0 unread follow-up(s)\n"

    # Next turn: the model follows the follow-up's hint (`actors result`) and messages the
    # live player through the CLI; the player acts.
    start = len(fake_llm.requests)
    with RpcClient(pi_socket) as client:
        turn(
            client,
            "[tool:bash:actors result pi1] [tool:bash:actors message run:piplayer player.next]",
            "TOKEN-PT2",
        )
    answered = fake_llm.wait_request(lambda r: len(tool_outputs(r["body"])) == 4, start)  # 2 + 2
    result, sent = tool_outputs(answered["body"])[2:]
    assert "pi1" in result and "done" in result, result
    assert "queued" in sent or "delivered" in sent, sent
    assert actors.status("piplayer")["status"] == "running"
    actors.message("run:piplayer", "player.stop", session=SESSION)
    assert actors.wait("piplayer", timeout=60)["status"] == "done"
    assert player_summaries("piplayer") == ["playing: track 1 of 3", "playing: track 2 of 3"]

"""The codex adapter against a real `codex app-server` on its Unix socket, and the fake model.

A second client (the "user's" connection, as a Codex TUI attached to the app-server would
be) owns the thread; the adapter connects on its own, like any delivering process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import actors
from adapters.codex.adapter import CodexAdapter
from adapters.codex.rpc import CodexConnection, connect
from runtime.delivery.contract import DeliveryContext
from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.conftest import PIN_IDS, PINS, doctor_verdicts, followup, register_session
from tests.peers.fake_llm import FakeLLM
from tests.peers.run_codex import Codex, codex_server, start, stop


@pytest.fixture(params=PINS, ids=PIN_IDS)
def server(tmp_path: Path, fake_llm: FakeLLM, request: pytest.FixtureRequest) -> Iterator[Codex]:
    """An app-server of the newest Codex pin and of the previous one (0.169.0,
    peers/previous): every test on a live app-server runs on both."""
    with codex_server(tmp_path / "codex", fake_llm.port, pin=request.param) as codex:
        yield codex


@pytest.fixture
async def owner(server: Codex) -> AsyncIterator[tuple[CodexConnection, str]]:
    """The thread's own client and the thread id."""
    async with connect(socket=str(server.socket)) as conn:
        await conn.initialize("peer-test")
        started = await conn.request("thread/start", {"cwd": str(server.project)})
        yield conn, started["thread"]["id"]


def register(server: Codex, thread: str, **extra: str) -> None:
    register_session("codex", socket=str(server.socket), thread=thread, **extra)


async def busy_turn(conn: CodexConnection, thread: str, fake_llm: FakeLLM) -> dict[str, Any]:
    """Start a turn the fake model keeps busy for 2 s; returns once the model has it."""
    from tests.peers.fake_llm import last_user_text

    mark = len(fake_llm.requests)
    busy = await conn.request(
        "turn/start",
        {"threadId": thread, "input": [{"type": "text", "text": "[slow:2] TOKEN-BUSY"}]},
    )
    await trio.to_thread.run_sync(
        lambda: fake_llm.wait_request(lambda r: "TOKEN-BUSY" in last_user_text(r["body"]), mark)
    )
    return busy


async def user_messages(conn: CodexConnection, thread: str) -> list[dict[str, Any]]:
    listed = await conn.request("thread/items/list", {"threadId": thread})
    return [e["item"] for e in listed["data"] if e["item"]["type"] == "userMessage"]


def text_of(item: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for part in item["content"])


async def test_run_followup_reaches_idle_thread(
    home: StateRoot, server: Codex, owner: tuple[CodexConnection, str], fake_llm: FakeLLM
) -> None:
    conn, thread = owner
    register(server, thread)
    mark = len(conn.notifications)
    record = actors.spawn(template="true", as_="run:TOKEN-CXRUN1", session="coord")
    await trio.to_thread.run_sync(finished, record)
    (state,) = DeliveryRunner(home).states("coord").values()
    assert state["state"] == "delivered", state.get("reason")
    assert {"triggered", "injected", "processed"} <= set(state["observed"])
    items = await user_messages(conn, thread)
    assert [i["clientId"] for i in items] == [state["id"]]
    assert "TOKEN-CXRUN1" in text_of(items[0])
    assert any("TOKEN-CXRUN1" in p for p in fake_llm.prompts())
    # the thread's own client saw the turn complete, as a TUI would
    done = await conn.wait_for(lambda n: n["method"] == "turn/completed", 10, mark)
    assert done is not None and done["params"]["turn"]["id"] == state["metadata"]["turn"]
    # the same delivery id again, straight at the adapter: found by clientId, not resent
    adapter = CodexAdapter({}, {"socket": str(server.socket), "thread": thread})
    context = DeliveryContext(delivery_id=state["id"])
    again = await trio.to_thread.run_sync(adapter.receive_message, followup("TOKEN-X"), context)
    assert again.status == "delivered" and again.metadata["already_stored"]
    assert len(await user_messages(conn, thread)) == 1


async def test_on_idle_holds_while_a_turn_is_busy(
    home: StateRoot, server: Codex, owner: tuple[CodexConnection, str], fake_llm: FakeLLM
) -> None:
    conn, thread = owner
    register(server, thread, processed_timeout="10")
    busy = await busy_turn(conn, thread, fake_llm)
    state = await trio.to_thread.run_sync(
        lambda: DeliveryRunner(home).submit(
            "coord", followup("TOKEN-HELD"), delivery_id="d-held", mode="on-idle"
        )
    )
    assert state["state"] == "delivered", state
    assert state["metadata"]["thread_status"] == "active" and state["metadata"]["held_ms"] > 0
    assert state["metadata"]["turn"] != busy["turn"]["id"], "on-idle must not steer"
    assert "processed" in state["observed"]
    prompts = fake_llm.prompts()
    assert prompts.index(next(p for p in prompts if "TOKEN-BUSY" in p)) < prompts.index(
        next(p for p in prompts if "TOKEN-HELD" in p)
    )


async def test_immediate_steers_into_the_busy_turn(
    home: StateRoot, server: Codex, owner: tuple[CodexConnection, str], fake_llm: FakeLLM
) -> None:
    conn, thread = owner
    register(server, thread, processed_timeout="10")
    busy = await busy_turn(conn, thread, fake_llm)
    state = await trio.to_thread.run_sync(
        lambda: DeliveryRunner(home).submit(
            "coord", followup("TOKEN-STEER"), delivery_id="d-steer", mode="immediate"
        )
    )
    assert state["state"] == "delivered", state
    assert state["metadata"]["turn"] == busy["turn"]["id"] and state["metadata"]["steered"]
    assert any("TOKEN-STEER" in p for p in fake_llm.prompts())


async def test_unknown_thread_and_missing_socket_fail_with_reasons(
    home: StateRoot, server: Codex, tmp_path: Path
) -> None:
    register(server, "01a20000-0000-7000-8000-000000000000")
    state = await trio.to_thread.run_sync(
        lambda: DeliveryRunner(home).submit("coord", followup("TOKEN-NT"), delivery_id="d-nt")
    )
    assert state["state"] == "failed-final" and "thread" in state["reason"], state
    options = {"socket": str(tmp_path / "nowhere.sock"), "thread": "t"}
    receipt = CodexAdapter({}, options).receive_message(followup("x"), DeliveryContext("d-gone"))
    assert receipt.status == "failed" and receipt.retryable
    assert "unreachable" in (receipt.reason or "")


async def test_app_server_restart_is_retried_and_delivered_once(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_RETRY_BASE", "0.05")
    base = tmp_path / "codex"
    first = start(base, fake_llm.port)
    async with connect(socket=str(first.socket)) as conn:
        await conn.initialize("peer-test")
        thread = (await conn.request("thread/start", {"cwd": str(first.project)}))["thread"]["id"]
        await conn.request(  # a first turn, so the thread is persisted in CODEX_HOME
            "turn/start", {"threadId": thread, "input": [{"type": "text", "text": "TOKEN-FIRST"}]}
        )
        assert await conn.wait_for(lambda n: n["method"] == "turn/completed", 20) is not None
    register(first, thread)
    stop(first.process)  # the socket vanished
    runner = DeliveryRunner(home)
    state = await trio.to_thread.run_sync(
        lambda: runner.submit("coord", followup("TOKEN-AGAIN"), delivery_id="d-again")
    )
    assert state["state"] == "retrying" and "unreachable" in state["reason"], state
    second = start(base, fake_llm.port)
    try:
        await trio.to_thread.run_sync(lambda: runner.process("coord", budget_s=30))
        state = runner.states("coord")["d-again"]
        assert state["state"] == "delivered" and state["attempts"] >= 2, state
        async with connect(socket=str(second.socket)) as conn:
            await conn.initialize("peer-test")
            await conn.request("thread/resume", {"threadId": thread})
            ids = [i.get("clientId") for i in await user_messages(conn, thread)]
        assert ids.count("d-again") == 1
    finally:
        stop(second.process)


async def test_stdio_transport_runs_a_turn(server: Codex, fake_llm: FakeLLM) -> None:
    """The same client over stdio, for an app-server we start ourselves."""
    import os

    from tests.peers.conftest import peer_bin

    env = dict(os.environ, CODEX_HOME=str(server.home), HOME=str(server.home.parent))
    command = [str(peer_bin("codex", server.pin)), "app-server"]
    async with connect(command=command, env=env) as conn:
        await conn.initialize("peer-test")
        thread = (await conn.request("thread/start", {"cwd": str(server.project)}))["thread"]["id"]
        await conn.request(
            "turn/start", {"threadId": thread, "input": [{"type": "text", "text": "TOKEN-STDIO"}]}
        )
        done = await conn.wait_for(lambda n: n["method"] == "turn/completed", 20)
    assert done is not None and done["params"]["turn"]["status"] == "completed"
    assert "TOKEN-STDIO" in fake_llm.prompts()


async def test_doctor_proves_the_levels_live(
    home: StateRoot, server: Codex, owner: tuple[CodexConnection, str], fake_llm: FakeLLM
) -> None:
    _, thread = owner
    register(server, thread)
    proc = await trio.to_thread.run_sync(lambda: cli("doctor", "delivery", "--session", "coord"))
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    verdicts = doctor_verdicts(proc.stdout, "codex", pin=server.pin)
    assert [verdicts.get(f"D{n}") for n in range(1, 9)] == ["pass"] * 8, proc.stdout
    token = proc.stdout.split("token=", 1)[1].split()[0]
    assert any(token in p for p in fake_llm.prompts()), "the probe never reached the model"

"""The opencode adapter against a real `opencode serve` and the fake model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from adapters.opencode.adapter import OpenCodeAdapter
from runtime.delivery.contract import DeliveryContext
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished
from tests.peers.conftest import doctor_verdicts, followup, register_session
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_opencode import OpenCode, opencode_server, start, stop_process


@pytest.fixture
def server(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[OpenCode]:
    with opencode_server(tmp_path / "oc", fake_llm.port) as oc:
        yield oc


def register(oc: OpenCode, session: str, *flags: str, **extra: str) -> None:
    # a fresh server spends seconds bootstrapping before its first turn: generous waits
    options = {
        "url": oc.url,
        "session": session,
        "password": oc.password,
        "confirm_timeout": "15",
        "processed_timeout": "30",
        **extra,
    }
    register_session("opencode", "coord", *flags, **options)


def test_run_followup_reaches_idle_session(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = server.new_session()
    register(server, ses)
    record = actors.spawn(template="true", as_="run:TOKEN-OCRUN1", session="coord")
    finished(record)
    (state,) = DeliveryRunner(home).states("coord").values()
    assert state["state"] == "delivered", state
    assert {"triggered", "injected", "processed"} <= set(state["observed"])
    texts = server.user_texts(ses)
    assert sum("TOKEN-OCRUN1" in t for t in texts) == 1, texts
    assert any("TOKEN-OCRUN1" in p for p in fake_llm.prompts()), "the model never saw the follow-up"
    # the model has the body: it is not left unread for `actors inbox read`
    assert SessionInbox(session_paths(home, "coord")).unread() == []
    # the same delivery id again, straight at the adapter (as after a crash before the
    # receipt was journaled): found by its marker, not sent twice
    context = DeliveryContext(delivery_id=state["id"], mode="immediate")
    adapter = OpenCodeAdapter({}, {"url": server.url, "session": ses, "password": "secret"})
    again = adapter.receive_message({"summary": "again TOKEN-OCRUN1"}, context)
    assert again.status == "delivered" and again.metadata["already_stored"]
    assert "triggered" not in again.observed
    assert sum("TOKEN-OCRUN1" in t for t in server.user_texts(ses)) == 1


def test_delivery_while_busy_is_queued_then_processed(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = server.new_session()
    register(server, ses)
    with server.client() as client:
        busy = {"parts": [{"type": "text", "text": "[slow:2] TOKEN-BUSY"}]}
        assert client.post(f"/session/{ses}/prompt_async", json=busy).status_code == 204
        fake_llm.wait_request(lambda r: last_user_text(r["body"]) == "[slow:2] TOKEN-BUSY")
        assert client.get("/session/status").json()[ses]["type"] == "busy"
    state = DeliveryRunner(home).submit(
        "coord", followup("TOKEN-QUEUED"), delivery_id="d-queued", mode="on-idle"
    )
    assert state["state"] == "delivered" and "processed" in state["observed"], state
    texts = server.user_texts(ses)
    assert next(t for t in texts if "TOKEN-" in t).endswith("TOKEN-BUSY")
    assert "TOKEN-QUEUED" in texts[-1]
    prompts = fake_llm.prompts()
    busy_at = next(i for i, p in enumerate(prompts) if "TOKEN-BUSY" in p)
    queued_at = next(i for i, p in enumerate(prompts) if "TOKEN-QUEUED" in p)
    assert busy_at < queued_at


def test_manual_mode_stores_without_a_turn(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = server.new_session()
    register(server, ses)
    DeliveryRunner(home).submit(
        "coord", followup("TOKEN-QUIET"), delivery_id="d-quiet", mode="manual"
    )
    receipts = DeliveryRunner(home).flush("coord")
    assert [r.status for r in receipts] == ["delivered"]
    assert "processed" not in receipts[0].observed
    assert any("TOKEN-QUIET" in t for t in server.user_texts(ses))
    assert not any("TOKEN-QUIET" in p for p in fake_llm.prompts())


def test_wrong_password_and_missing_session_fail_with_reasons(
    home: StateRoot, server: OpenCode
) -> None:
    ses = server.new_session()
    register(server, ses, "--no-check", password="wrong")  # registration would refuse it
    state = DeliveryRunner(home).submit("coord", followup("TOKEN-PW"), delivery_id="d-pw")
    assert state["state"] == "failed-final"
    assert "401" in state["reason"] and "password" in state["reason"]
    register(server, "ses_doesnotexist", "--no-check")
    state = DeliveryRunner(home).submit("coord", followup("TOKEN-NS"), delivery_id="d-ns")
    assert state["state"] == "failed-final"
    assert "Session not found" in state["reason"]


def test_registration_refuses_a_wrong_password_or_session(
    home: StateRoot, server: OpenCode
) -> None:
    base = ["session", "register", "--harness", "opencode", "--id", "c", "-o", f"url={server.url}"]
    ses = server.new_session()
    wrong = cli(*base, "-o", f"session={ses}", "-o", "password=wrong")
    assert wrong.returncode == 2 and "401" in wrong.stderr, wrong.stderr
    missing = cli(*base, "-o", "session=ses_doesnotexist", "-o", f"password={server.password}")
    assert missing.returncode == 2 and "404" in missing.stderr, missing.stderr
    assert not home.sessions.exists()
    right = cli(*base, "-o", f"session={ses}", "-o", f"password={server.password}")
    assert right.returncode == 0, right.stderr


def test_server_down_is_retried_and_delivered_once_after_restart(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_RETRY_BASE", "0.05")
    base = tmp_path / "oc"
    with opencode_server(base, fake_llm.port) as first:
        ses = first.new_session()
        register(first, ses)
        port = int(first.url.rsplit(":", 1)[1])
    # the server is gone (killed, as a crash would): the delivery is kept and retried
    runner = DeliveryRunner(home)
    state = runner.submit("coord", followup("TOKEN-RESTART"), delivery_id="d-restart")
    assert state["state"] == "retrying" and "unreachable" in state["reason"]
    second = start(base, fake_llm.port, port=port)
    try:
        runner.process("coord", budget_s=30)
        state = runner.states("coord")["d-restart"]
        assert state["state"] == "delivered", state
        assert state["attempts"] >= 2
        assert sum("TOKEN-RESTART" in t for t in second.user_texts(ses)) == 1
    finally:
        stop_process(second.process)


def test_doctor_proves_the_levels_live(
    home: StateRoot, server: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = server.new_session()
    register(server, ses)
    proc = cli("doctor", "delivery", "--session", "coord")
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    verdicts = doctor_verdicts(proc.stdout, "opencode")
    assert [verdicts.get(f"D{n}") for n in range(1, 9)] == ["pass"] * 8, proc.stdout
    token = proc.stdout.split("token=", 1)[1].split()[0]
    assert any(token in p for p in fake_llm.prompts()), "the probe never reached the model"

"""Kilo Code's CLI (`kilo serve`, an OpenCode fork) reached by the opencode adapter.

Kilo kept OpenCode's server: the same HTTP API (`POST /session/{id}/prompt_async`,
`GET /session/{id}/message/{messageID}`, `/session/status`), the same HTTP Basic gate
(`KILO_SERVER_PASSWORD`, default user `kilo`). So a Kilo session is registered as an
`opencode` session with `-o username=kilo`, and no Kilo code exists in actors. The proof
is on what the fake model was sent and on what Kilo stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox, load_session
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished
from tests.peers.conftest import MORE, doctor_verdicts, followup, register_session
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_opencode import KILO, OpenCode, opencode_server

KILO_SETUP = "Kilo Code: `kilo serve`, -o username=kilo"
"""How the Kilo row of docs/adapters.md's level table was reached."""


@pytest.fixture
def kilo(tmp_path: Path, fake_llm: FakeLLM) -> Iterator[OpenCode]:
    with opencode_server(tmp_path / "kilo", fake_llm.port, flavour=KILO) as server:
        yield server


def register(server: OpenCode, session: str) -> None:
    register_session(
        "opencode",
        "coord",
        url=server.url,
        session=session,
        username="kilo",
        password=server.password,
        confirm_timeout="15",
        processed_timeout="30",
    )


def test_run_followup_wakes_an_idle_kilo_session(
    home: StateRoot, kilo: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = kilo.new_session()
    register(kilo, ses)
    assert fake_llm.requests == []  # idle: nothing has asked the model anything yet
    record = actors.spawn(template="true", as_="run:TOKEN-KILORUN", session="coord")
    finished(record)
    (state,) = DeliveryRunner(home).states("coord").values()
    assert state["state"] == "delivered", state
    assert {"triggered", "injected", "processed"} <= set(state["observed"])
    assert sum("TOKEN-KILORUN" in t for t in kilo.user_texts(ses)) == 1
    (request,) = [r for r in fake_llm.requests if "TOKEN-KILORUN" in last_user_text(r["body"])]
    assert request["path"] == "/v1/chat/completions"
    assert SessionInbox(session_paths(home, "coord")).unread() == []


def test_the_opencode_user_is_refused_by_kilo(home: StateRoot, kilo: OpenCode) -> None:
    """Kilo's server user is `kilo`: without `-o username=kilo` registration says 401."""
    ses = kilo.new_session()
    done = cli(
        "session", "register", "--harness", "opencode", "--id", "c", "-o", f"url={kilo.url}",
        "-o", f"session={ses}", "-o", f"password={kilo.password}",
    )  # fmt: skip
    assert done.returncode == 2 and "401" in done.stderr, done.stderr
    assert not home.sessions.exists()


def test_doctor_proves_the_kilo_levels_live(
    home: StateRoot, kilo: OpenCode, fake_llm: FakeLLM
) -> None:
    ses = kilo.new_session()
    register(kilo, ses)
    state = DeliveryRunner(home).submit("coord", followup("TOKEN-KILOWARM"), delivery_id="d-w")
    assert state["state"] == "delivered", state
    proc = cli("doctor", "delivery", "--session", "coord")
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    verdicts = doctor_verdicts(proc.stdout, "kilo", pin=MORE, setup=KILO_SETUP)
    assert [verdicts.get(f"D{n}") for n in range(1, 9)] == ["pass"] * 8, proc.stdout
    token = proc.stdout.split("token=", 1)[1].split()[0]
    assert any(token in p for p in fake_llm.prompts()), "the probe never reached the model"


def test_the_mcp_loop_on_kilo_after_actors_install_kilo(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Set up as docs/harnesses.md says: `actors install kilo --user` (the MCP entry in
    kilo.json and the session plugin) before `kilo serve` starts, no `actors session
    register`. The model spawns a run through our MCP tool; the MCP server registers the
    calling Kilo session itself (its URL proven to be the Kilo that started it), and the
    run's follow-up wakes that session. A server without a password: Kilo, unlike
    OpenCode, keeps KILO_SERVER_PASSWORD from its MCP servers (docs/harnesses.md)."""
    from tests.peers.test_mcp_opencode import call_tool

    base = tmp_path / "kilo-mcp"
    with opencode_server(base, fake_llm.port, "", install=True, flavour=KILO) as kilo:
        ses = kilo.new_session()
        seen = call_tool(kilo, fake_llm, ses, "spawn", {"template": "true", "as": "run:kilo-a"})
        assert seen == "started run:kilo-a; its follow-up will arrive in this session (do not poll)"
        status = actors.status("kilo-a")
        assert status["owner_id"] == ses
        record = load_session(home, ses)
        assert record["harness"] == "opencode" and record["options"]["url"] == kilo.url
        finished(status)
        (state,) = DeliveryRunner(home).states(ses).values()
        assert state["state"] == "delivered", state
        assert sum("Run kilo-a" in t for t in kilo.user_texts(ses)) == 1
        assert any("Run kilo-a" in p for p in fake_llm.prompts()), "the model never saw it"
        assert call_tool(kilo, fake_llm, ses, "inbox_read", {}) == "0 unread follow-up(s)"

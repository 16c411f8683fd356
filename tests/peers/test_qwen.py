"""Qwen Code (real, offline against the fake model): headless with the Stop hook, and
interactive, woken idle by the `qwen_code` adapter through its input file.

`actors hook qwen-stop` answers Qwen's Stop event with `{"decision": "block", "reason":
<the follow-ups>}` and Qwen sends the reason to the model as the next prompt of the same
turn. The proof is on what the model was sent (the fake LLM's request bodies, over
OpenAI Chat Completions), on the Stop inputs Qwen gave its hooks, and on our journal.
"""

from __future__ import annotations

from pathlib import Path

import actors
from adapters.qwen_input import QwenInputAdapter
from runtime.delivery.contract import DeliveryContext
from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.conftest import MORE, doctor_verdicts, followup, register_session
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.hooked import hand_over_once
from tests.peers.run_qwen import Qwen, qwen_tui

SESSION = "qwen-main"
TUI_SETUP = "interactive: qwen --input-file F --json-file E"
"""How the Qwen Code row of docs/adapters.md's level table was reached."""


def test_pending_follow_up_is_the_next_prompt_exactly_once(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    qwen = Qwen(tmp_path / "qwen", fake_llm.port, home.path, SESSION)
    seen = hand_over_once(
        home, fake_llm, qwen, harness="qwen_code", boundary="Stop", token="TOKEN-QWENFOLLOW"
    )
    assert all(r["path"] == "/v1/chat/completions" for r in seen.requests)
    assert "ACK" in seen.first["result"] and "TOKEN-QWENFOLLOW" in seen.first["result"], seen
    assert seen.inputs[0]["last_assistant_message"] == "ACK TOKEN-FIRST"
    assert seen.later["result"] == "ACK TOKEN-SECOND", seen.later


def test_a_run_follow_up_wakes_the_idle_interactive_qwen(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """The user's own interactive Qwen Code, idle: a run ends and its follow-up is the
    model's next request, through the input file, confirmed from Qwen's events."""
    qwen = Qwen(tmp_path / "qwen", fake_llm.port, home.path, SESSION).setup()
    with qwen_tui(qwen) as tui:
        register_session("qwen_code", SESSION, **tui.options())
        assert fake_llm.requests == []  # idle: nothing asked the model anything yet
        record = actors.spawn(template="true", as_="run:TOKEN-QWENWAKE", session=SESSION)
        finished(record)
        (state,) = DeliveryRunner(home).states(SESSION).values()
        assert state["state"] == "delivered", (state, tui.screen())
        assert {"triggered", "injected", "processed"} <= set(state["observed"])
        woke = [r for r in fake_llm.requests if "TOKEN-QWENWAKE" in last_user_text(r["body"])]
        assert len(woke) == 1 and woke[0]["path"] == "/v1/chat/completions"
        assert state["id"] in last_user_text(woke[0]["body"])
        # the same delivery again, as after a crash before the receipt: not written twice
        (line,) = tui.input_file.read_text().splitlines()
        context = DeliveryContext(delivery_id=state["id"], mode="immediate")
        adapter = QwenInputAdapter({}, tui.options())
        again = adapter.receive_message({"summary": "again TOKEN-QWENWAKE"}, context)
        assert again.status == "delivered" and again.metadata["already_written"]
        assert tui.input_file.read_text().splitlines() == [line]
        assert sum("TOKEN-QWENWAKE" in p for p in fake_llm.prompts()) == 1


def test_doctor_proves_the_interactive_qwen_levels(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    qwen = Qwen(tmp_path / "qwen", fake_llm.port, home.path, SESSION).setup()
    with qwen_tui(qwen) as tui:
        register_session("qwen_code", SESSION, **tui.options())
        warm = DeliveryRunner(home).submit(SESSION, followup("TOKEN-QWARM"), delivery_id="d-w")
        assert warm["state"] == "delivered", (warm, tui.screen())
        proc = cli("doctor", "delivery", "--session", SESSION)
        assert proc.returncode == 0, proc.stderr
        print(proc.stdout)
        verdicts = doctor_verdicts(proc.stdout, "qwen", pin=MORE, setup=TUI_SETUP)
        assert [verdicts.get(f"D{n}") for n in range(1, 9)] == ["pass"] * 8, proc.stdout
        token = proc.stdout.split("token=", 1)[1].split()[0]
        assert any(token in p for p in fake_llm.prompts()), "the probe never reached the model"

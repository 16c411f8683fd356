"""The pi adapter against a real pi (RPC mode, under adapters.pi.host) and the fake model."""

from __future__ import annotations

import json
import socket
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import actors
from adapters.pi.adapter import PiAdapter
from runtime.delivery.contract import AdapterError, DeliveryContext, Receipt
from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.conftest import PIN_IDS, PINS, doctor_verdicts, followup, register_session
from tests.peers.fake_llm import FakeLLM
from tests.peers.run_pi import RpcClient, run_pi, text_of

LATENCIES_MS: list[float] = []
"""send -> user message_end of every delivery that reached an idle pi (reported at the end)."""


@pytest.fixture(params=PINS, ids=PIN_IDS)
def pi_pin(request: pytest.FixtureRequest) -> str:
    """pi 1.x (`@earendil-works/pi-coding-agent`) and the previous pin under its old name
    (0.73.1, peers/previous): every test on a pi of ours runs on both."""
    return str(request.param)


@pytest.fixture
def pi_socket(tmp_path: Path, fake_llm: FakeLLM, pi_pin: str) -> Iterator[Path]:
    with run_pi(tmp_path / "pi", fake_llm.port, pin=pi_pin) as path:
        yield path


@pytest.fixture(scope="module", autouse=True)
def _report_latency() -> Iterator[None]:
    yield
    if LATENCIES_MS:
        print(
            f"\npi wake-to-injected (idle, send -> user message_end): median"
            f" {statistics.median(LATENCIES_MS):.1f} ms over {len(LATENCIES_MS)} deliveries"
            f" {sorted(LATENCIES_MS)}"
        )


def _user_count(client: RpcClient, needle: str) -> int:
    return sum(needle in text for text in client.user_texts())


def test_run_followup_lands_in_idle_pi(home: StateRoot, pi_socket: Path, fake_llm: FakeLLM) -> None:
    register_session("pi", socket=str(pi_socket))
    record = actors.spawn("hello", as_="run:TOKEN-PIRUN1", session="coord")
    assert finished(record)["status"] == "done"
    (state,) = DeliveryRunner(home).states("coord").values()
    assert state["state"] == "delivered", state
    assert state["harness"] == "pi"
    assert {"triggered", "injected", "processed"} <= set(state["observed"]), state
    assert state["metadata"]["boundary"] == "sent"
    LATENCIES_MS.append(state["metadata"]["injected_ms"])
    delivery_id = state["id"]
    seen = [p for p in fake_llm.prompts() if delivery_id in p]
    assert len(seen) == 1, fake_llm.prompts()
    assert "TOKEN-PIRUN1" in seen[0]
    with RpcClient(pi_socket) as client:
        messages = client.messages()
        users = [m for m in messages if m["role"] == "user" and delivery_id in text_of(m)]
        assert len(users) == 1, messages
        assert text_of(users[0]).startswith("[actors] ")
        assert text_of(messages[-1]).startswith("ACK TOKEN-PIRUN1")  # the model answered it


def test_busy_pi_gets_steer_now_and_follow_up_after(
    pi_socket: Path, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    steer = PiAdapter({}, {"socket": str(pi_socket)})
    follow = PiAdapter({}, {"socket": str(pi_socket), "confirm_timeout": "0.3"})
    later = DeliveryContext(delivery_id="dlv-follow", mode="on-idle")
    now = DeliveryContext(delivery_id="dlv-steer", mode="immediate")
    with RpcClient(pi_socket) as client:
        assert client.request({"type": "prompt", "message": "busy [slow:3] TOKEN-BUSY"})["success"]
        busy_at = client.wait_event("message_end", "user", "TOKEN-BUSY")  # pi is streaming now
        # on-idle: pi queues it behind the busy run; not in the conversation within 0.3 s
        queued = follow.receive_message(followup("TOKEN-FOLLOW"), later)
        assert queued.status == "accepted", queued
        assert queued.metadata["boundary"] == "queued-follow-up"
        assert queued.metadata["streaming"] is True
        # a retry while it is still queued is recognised there, not queued a second time
        again = follow.receive_message(followup("TOKEN-FOLLOW"), later)
        assert again.status == "accepted", again
        assert again.metadata["boundary"] == "already-queued"
        # immediate: a steer, injected as soon as the busy turn's model call ends
        steered = steer.receive_message(followup("TOKEN-STEER"), now)
        assert steered.status == "delivered", steered
        assert steered.metadata["boundary"] == "queued-steer"
        assert steered.observed == ["triggered", "injected", "processed"]
        follow_at = client.wait_event("message_end", "user", "dlv-follow")
        end_at = client.wait_event("agent_end")
        steer_at = client.wait_event("message_end", "user", "dlv-steer")
        assert busy_at < steer_at < follow_at < end_at, "one agent run: busy, steer, follow-up"
        # pi 1.x keeps its system prompt as a leading `system` message (0.73: none)
        roles = [(m["role"], text_of(m)) for m in client.messages() if m["role"] != "system"]
    assert [r for r, _ in roles] == ["user", "assistant"] * 3, roles
    assert "TOKEN-BUSY" in roles[0][1] and roles[1][1].startswith("ACK TOKEN-BUSY")
    assert "dlv-steer" in roles[2][1] and roles[3][1].startswith("ACK TOKEN-STEER")
    assert "dlv-follow" in roles[4][1] and roles[5][1].startswith("ACK TOKEN-FOLLOW")
    assert sum("dlv-follow" in p for p in fake_llm.prompts()) == 1


def test_redelivering_the_same_id_creates_no_second_message(
    pi_socket: Path, fake_llm: FakeLLM
) -> None:
    adapter = PiAdapter({}, {"socket": str(pi_socket)})
    context = DeliveryContext(delivery_id="dlv-once", mode="immediate")
    first = adapter.receive_message(followup("TOKEN-ONCE"), context)
    assert first.status == "delivered", first
    assert first.observed == ["triggered", "injected", "processed"]
    LATENCIES_MS.append(first.metadata["injected_ms"])
    second = adapter.receive_message(followup("TOKEN-ONCE"), context)
    assert second.status == "delivered", second
    assert second.metadata["duplicate"] is True
    assert second.observed == ["triggered", "injected", "processed"]
    with RpcClient(pi_socket) as client:
        # a sentinel turn after both attempts: a second copy would have landed before it
        assert client.request({"type": "prompt", "message": "sentinel TOKEN-SENTINEL"})["success"]
        client.wait_event("agent_end")
        assert _user_count(client, "dlv-once") == 1
    assert sum("dlv-once" in p for p in fake_llm.prompts()) == 1


def test_idle_deliveries_in_a_row(pi_socket: Path) -> None:
    """More idle deliveries (for the latency figure), in order; `dlv-row1` after
    `dlv-row10` is a new delivery, not a duplicate found inside the longer id."""
    adapter = PiAdapter({}, {"socket": str(pi_socket)})
    numbers = (10, 1, 2, 3, 4)
    for number in numbers:
        receipt = adapter.receive_message(
            followup(f"TOKEN-ROW{number}"), DeliveryContext(delivery_id=f"dlv-row{number}")
        )
        assert receipt.status == "delivered", receipt
        assert receipt.metadata["boundary"] == "sent", receipt
        LATENCIES_MS.append(receipt.metadata["injected_ms"])
    with RpcClient(pi_socket) as client:
        rows = [t for t in client.user_texts() if "dlv-row" in t]
    assert [f"TOKEN-ROW{n}\n" in t for n, t in zip(numbers, rows, strict=True)] == [True] * 5


def test_concurrent_deliveries_each_land_once(pi_socket: Path) -> None:
    """Two clients at once: the host keeps their ids apart and both messages land once."""
    adapter = PiAdapter({}, {"socket": str(pi_socket)})

    def deliver(index: int) -> Receipt:
        return adapter.receive_message(
            followup(f"TOKEN-PAR{index}"),
            DeliveryContext(delivery_id=f"dlv-par{index}", mode="on-idle"),
        )

    with ThreadPoolExecutor(2) as pool:
        receipts = list(pool.map(deliver, range(2)))
    assert [r.status for r in receipts] == ["delivered", "delivered"], receipts
    with RpcClient(pi_socket) as client:
        texts = client.user_texts()
    assert [sum(f"dlv-par{i}" in t for t in texts) for i in range(2)] == [1, 1]


def test_host_lets_prompts_through_one_at_a_time(pi_socket: Path) -> None:
    """Two prompts in one write: pi alone would answer both success and drop one."""
    with RpcClient(pi_socket) as client:
        client.sock.sendall(
            b"".join(
                json.dumps(
                    {"id": name, "type": "prompt", "message": f"{name} TOKEN-{name}"}
                    | {"streamingBehavior": "followUp"}
                ).encode()
                + b"\n"
                for name in ("GATE1", "GATE2")
            )
        )
        client.wait_event("message_end", "user", "TOKEN-GATE2")
        client.wait_event("agent_end")
        assert [t.split()[0] for t in client.user_texts()] == ["GATE1", "GATE2"]


def test_pi_rejection_is_reported_with_pis_reason(tmp_path: Path, fake_llm: FakeLLM) -> None:
    with run_pi(tmp_path / "nokey", fake_llm.port, models=False) as path:
        receipt = PiAdapter({}, {"socket": str(path)}).receive_message(
            followup("TOKEN-NOKEY"), DeliveryContext(delivery_id="dlv-nokey")
        )
        with RpcClient(path) as client:
            assert client.messages() == []
    assert receipt.status == "failed"
    assert receipt.retryable is False
    assert receipt.reason is not None and "pi rejected the prompt" in receipt.reason
    assert "No API key" in receipt.reason or "model" in receipt.reason.lower(), receipt.reason


@pytest.mark.parametrize("approve", [False, True], ids=["untrusted", "approve"])
def test_project_settings_reach_pi_through_the_host_with_approve(
    tmp_path: Path, fake_llm: FakeLLM, approve: bool
) -> None:
    """pi >= 0.79 gates a project's .pi/ settings and extensions behind trust, and RPC mode
    cannot ask: it skips them unless told `--approve`, which the host passes through from
    its command line (after --) as given. The previous pin (0.73.1) has no gate (and no
    such flag): the setting loads as it is."""
    base = tmp_path / "pi"
    (base / "proj" / ".pi").mkdir(parents=True)
    (base / "proj" / ".pi" / "settings.json").write_text(json.dumps({"followUpMode": "all"}))
    with (
        run_pi(base, fake_llm.port, args=("--approve",) if approve else ()) as path,
        RpcClient(path) as client,
    ):
        state = client.request({"type": "get_state"})["data"]
    assert state["followUpMode"] == ("all" if approve else "one-at-a-time"), state
    with run_pi(base, fake_llm.port, pin="previous") as path, RpcClient(path) as client:
        assert client.request({"type": "get_state"})["data"]["followUpMode"] == "all"


def test_missing_or_dead_socket_is_a_retryable_failure(tmp_path: Path) -> None:
    missing = tmp_path / "absent.sock"
    receipt = PiAdapter({}, {"socket": str(missing)}).receive_message(
        followup("TOKEN-X"), DeliveryContext(delivery_id="dlv-missing")
    )
    assert receipt.status == "failed" and receipt.retryable, receipt
    assert receipt.reason is not None
    assert str(missing) in receipt.reason and "does not exist" in receipt.reason
    assert "actors-pi-host" in receipt.reason
    dead = tmp_path / "dead.sock"  # a socket file nobody listens on (a crashed host)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(dead))
    receipt = PiAdapter({}, {"socket": str(dead)}).receive_message(
        followup("TOKEN-X"), DeliveryContext(delivery_id="dlv-dead")
    )
    assert receipt.status == "failed" and receipt.retryable, receipt
    assert receipt.reason is not None and str(dead) in receipt.reason
    assert "refuses" in receipt.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "-o socket=PATH"),
        ({"socket": "relative.sock"}, "absolute"),
        ({"socket": "/" + "x" * 120}, "107 bytes"),
        ({"socket": "/tmp/p.sock", "confirm_timeout": "soon"}, "confirm_timeout"),
        ({"socket": "/tmp/p.sock", "processed_timeout": "-1"}, "processed_timeout"),
    ],
)
def test_options_are_checked(options: dict[str, str], message: str) -> None:
    with pytest.raises(AdapterError, match=message):
        PiAdapter.check_options(options)


def test_register_without_socket_is_refused(home: StateRoot) -> None:
    done = cli("session", "register", "--harness", "pi", "--id", "coord")
    assert done.returncode != 0
    assert "-o socket=PATH" in done.stderr


def test_doctor_reports_pi_levels(home: StateRoot, pi_socket: Path, pi_pin: str) -> None:
    register_session("pi", socket=str(pi_socket))
    proc = cli("doctor", "delivery", "--session", "coord")
    assert "harness=pi" in proc.stdout, proc.stdout + proc.stderr
    doctor_verdicts(proc.stdout, "pi", pin=pi_pin)
    for line in ("D5 context_injection: pass", "D7 completion_reply: pass", "D8 robustness: pass"):
        assert line in proc.stdout, proc.stdout
    assert "D1 native_free_continuation: fail" in proc.stdout  # our own pi, not a user's TUI

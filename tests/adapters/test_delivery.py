"""Follow-up delivery end to end: sessions, receipts, retries, order, held modes, races."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

import actors
from adapters.webhook import verify
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests._levels import observed
from tests.conftest import cli, finished, make_fifo, read_fifo_line


def register(*args: str) -> str:
    proc = cli("session", "register", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def followups(home: StateRoot, session: str, kind: str | None = None) -> list[dict[str, object]]:
    entries = SessionInbox(session_paths(home, session)).entries()
    return [e for e in entries if kind is None or e["envelope"]["type"] == kind]


def test_follow_up_lands_once_while_runner_watch_and_reconcile_race(home: StateRoot) -> None:
    session = register("--harness", "file", "--id", "coord-race")
    watcher = subprocess.Popen([sys.executable, "-m", "actors", "watch", "--timeout", "60"])
    try:
        record = actors.spawn("hello", session=session)
        racers = [subprocess.Popen([sys.executable, "-m", "actors", "reconcile"]) for _ in range(4)]
        assert finished(record)["status"] == "done"
        racers += [
            subprocess.Popen([sys.executable, "-m", "actors", "reconcile"]) for _ in range(4)
        ]
        assert [p.wait(timeout=60) for p in racers] == [0] * 8
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=30)
    done = followups(home, session, "run.done")
    assert len(done) == 1
    assert done[0]["envelope"]["body"]["run"] == record["run"]
    created = [
        r
        for r in read_jsonl(session_paths(home, session).deliveries).records
        if r.get("event") == "created"
    ]
    assert len(created) == 1
    read = cli("inbox", "read", "--session", session)
    assert read.stdout.startswith("1 unread follow-up(s)\n")
    assert cli("inbox", "read", "--session", session).stdout.startswith("0 unread")


def test_killed_runner_is_reconciled_to_exited_and_followed_up_once(
    home: StateRoot, tmp_path: Path
) -> None:
    session = register("--harness", "file", "--id", "coord-exit")
    fifo = make_fifo(tmp_path / "ready.fifo")
    pidfile = tmp_path / "child.pid"
    record = actors.spawn(
        template='sh -c \'echo $$ > "$2"; echo ready > "$1"; sleep 300\' x {f} {p}',
        values={"f": str(fifo), "p": str(pidfile)},
        session=session,
    )
    assert read_fifo_line(fifo) == "ready"
    child = int(pidfile.read_text())
    os.kill(record["pid"], signal.SIGKILL)
    assert actors.wait(record["run"], timeout=30)["status"] == "exited"
    for _ in range(3):
        assert cli("reconcile").returncode == 0
    assert actors.result(record["run"])["status"] == "exited"
    from tests.conftest import alive

    assert not alive(child)
    exited = followups(home, session, "run.exited")
    assert len(exited) == 1


class _Hook(BaseHTTPRequestHandler):
    script: ClassVar[list[int]] = []
    log: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        code = self.script.pop(0) if self.script else 200
        self.log.append(
            {
                "code": code,
                "body": json.loads(body),
                "sig": self.headers.get("X-Actors-Signature"),
                "raw": body,
                "delivery": self.headers.get("X-Actors-Delivery"),
            }
        )
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"script": [], "log": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


def test_webhook_retries_503_then_delivers_once_and_never_retries_400(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, webhook: tuple[str, type[_Hook]]
) -> None:
    monkeypatch.setenv("ACTORS_RETRY_BASE", "0.05")
    url, hook = webhook
    session = register(
        "--harness", "webhook", "--id", "hooked", "-o", f"url={url}", "-o", "secret=s3cret"
    )
    hook.script.extend([503, 503, 200])
    record = actors.spawn("hello", session=session)
    assert finished(record)["status"] == "done"
    assert [entry["code"] for entry in hook.log] == [503, 503, 200]
    assert len({entry["delivery"] for entry in hook.log}) == 1
    assert all(
        verify("s3cret", str(entry["sig"]), str(entry["delivery"]), entry["raw"])  # type: ignore[arg-type]
        for entry in hook.log
    )
    states = DeliveryRunner(home).states(session)
    (state,) = states.values()
    assert state["state"] == "delivered" and state["attempts"] == 3
    journal = [r["event"] for r in read_jsonl(session_paths(home, session).deliveries).records]
    assert journal == ["created", "failed", "failed", "delivered"]

    hook.log.clear()
    hook.script.extend([400])
    second = actors.spawn("hello", session=session)
    finished(second)
    assert cli("reconcile").returncode == 0
    assert [entry["code"] for entry in hook.log] == [400]
    failed = [
        s for s in DeliveryRunner(home).states(session).values() if s["state"] == "failed-final"
    ]
    assert len(failed) == 1 and failed[0]["reason"] == "HTTP 400"
    assert len(followups(home, session, "run.done")) == 2  # nothing lost: still in the inbox


def test_order_is_kept_across_retries(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, webhook: tuple[str, type[_Hook]]
) -> None:
    monkeypatch.setenv("ACTORS_RETRY_BASE", "0.05")
    url, hook = webhook
    session = register("--harness", "webhook", "--id", "ordered", "-o", f"url={url}")
    hook.script.extend([503, 200, 200])
    runner = DeliveryRunner(home)
    for n in (1, 2):
        runner.submit(
            session,
            {"id": f"m{n}", "type": "note", "summary": f"n{n}", "body": n},
            delivery_id=f"d{n}",
            budget_s=0,
        )
    runner.process(session, budget_s=10)
    assert [(e["code"], e["body"]["body"]) for e in hook.log] == [(503, 1), (200, 1), (200, 2)]


def test_manual_mode_holds_until_flush(home: StateRoot) -> None:
    session = register("--harness", "file", "--id", "held", "-o", "mode=manual")
    record = actors.spawn("hello", session=session)
    finished(record)
    (pending,) = DeliveryRunner(home).pending(session)
    assert pending["mode"] == "manual"
    flushed = cli("flush", "--session", session)
    assert flushed.returncode == 0 and " delivered" in flushed.stdout
    assert DeliveryRunner(home).pending(session) == []


def test_second_submission_of_a_delivery_id_is_a_noop(home: StateRoot) -> None:
    runner = DeliveryRunner(home)
    first = runner.submit("dup", {"id": "x", "type": "note", "summary": "s"}, delivery_id="same")
    second = runner.submit(
        "dup", {"id": "y", "type": "note", "summary": "other"}, delivery_id="same"
    )
    assert second == first
    assert len(SessionInbox(session_paths(home, "dup")).entries()) == 1


def test_intentional_stops_do_not_follow_up(home: StateRoot, tmp_path: Path) -> None:
    session = register("--harness", "file", "--id", "quiet")
    fifo = make_fifo(tmp_path / "ready.fifo")
    record = actors.spawn(
        template="sh -c 'echo ready > \"$1\"; sleep 300' x {f}",
        values={"f": str(fifo)},
        session=session,
    )
    assert read_fifo_line(fifo) == "ready"
    actors.kill(record["run"], session=session)
    assert cli("reconcile").returncode == 0
    assert followups(home, session) == []


def test_bad_sessions_are_refused_at_registration(home: StateRoot) -> None:
    for args, expected in [
        (["--harness", "pigeon"], "unknown harness 'pigeon'"),
        (["--harness", "webhook"], "webhook needs -o url="),
        (
            ["--harness", "tmux", "-o", "target=nowhere:0.0", "-o", "socket=actors-none"],
            "is not reachable",
        ),
        (["--harness", "file", "-o", "novalue"], "is not KEY=VALUE"),
    ]:
        proc = cli("session", "register", *args)
        assert proc.returncode == 2, proc.stderr
        assert expected in proc.stderr
    assert not home.sessions.exists()


def test_doctor_prints_the_levels_block_for_a_file_session(home: StateRoot) -> None:
    session = register("--harness", "file", "--id", "doc")
    proc = cli("doctor", "delivery", "--session", session)
    observed(proc.stdout)
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["DELIVERY_LEVELS:", "harness=file"]
    levels = [line.split(":")[0] for line in lines[4:]]
    assert levels == [
        f"D{n} " + name
        for n, name in enumerate(
            [
                "live_session",
                "native_free_continuation",
                "receiver_armed",
                "addressed_enqueue",
                "idle_active_wake",
                "context_injection",
                "continuity",
                "completion_reply",
                "robustness",
            ]
        )
    ]
    assert "D3 addressed_enqueue: pass" in proc.stdout and "D8 robustness: pass" in proc.stdout
    assert SessionInbox(session_paths(home, session)).unread() == []


def test_doctor_on_a_webhook_with_a_live_receiver(
    home: StateRoot, webhook: tuple[str, type[_Hook]]
) -> None:
    """The probe reaches a real receiver on loopback: D2 (armed) and D3 pass, signed."""
    url, hook = webhook
    session = register("--harness", "webhook", "--id", "wh", "-o", f"url={url}", "-o", "secret=k")
    proc = cli("doctor", "delivery", "--session", session)
    assert proc.returncode == 0, proc.stderr
    verdicts = observed(proc.stdout, setup="a receiver listening on 127.0.0.1")
    assert verdicts["D2"] == verdicts["D3"] == verdicts["D8"] == "pass", proc.stdout
    token = proc.stdout.split("token=", 1)[1].split()[0]
    (probe,) = [entry for entry in hook.log if token in json.dumps(entry["body"])]
    assert verify("k", str(probe["sig"]), str(probe["delivery"]), probe["raw"])  # type: ignore[arg-type]


def test_a_follow_up_read_from_the_inbox_is_never_flushed_again(home: StateRoot) -> None:
    """A held (manual) delivery the agent already read with `actors inbox read` is
    journaled delivered, so a later flush does not send it a second time."""
    from runtime.delivery.engine import DeliveryRunner

    runner = DeliveryRunner(home)
    envelope = {"type": "run.done", "from": "run:x", "summary": "Run x done"}
    assert (
        runner.submit("reader", envelope, delivery_id="d-held", mode="manual")["state"] == "queued"
    )
    read = cli("inbox", "read", "--session", "reader")
    assert read.returncode == 0 and "1 unread" in read.stdout
    state = runner.states("reader")["d-held"]
    assert state["state"] == "delivered" and state["metadata"]["boundary"] == "inbox read"
    assert runner.flush("reader") == []
    assert cli("inbox", "read", "--session", "reader").stdout.startswith("0 unread")

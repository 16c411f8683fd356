"""The hooks of the actors pi extension (`actors hook pi-session-start`, `pi-wake`,
`pi-serve`), run as the extension runs them: the real CLI, JSON on stdin. What pi does
with the answers is tests/peers/test_pi_tui.py's; here, what a careless or hostile input
does to the state root, and that every follow-up is handed over exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox, load_session
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import cli

PI_ID = "01a21e36-61a0-73f5-be50-c96eab87b43f"


def hook(name: str, data: Any, raw: str | None = None) -> subprocess.CompletedProcess[str]:
    done = cli("hook", name, input=raw if raw is not None else json.dumps(data))
    assert done.returncode == 0, done.stderr  # a hook never fails its harness
    return done


def start(pi_id: str = PI_ID) -> dict[str, Any]:
    done = hook("pi-session-start", {"session_id": pi_id, "cwd": "/proj", "session_file": None})
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def envelope(summary: str) -> dict[str, Any]:
    return {"type": "run.done", "from": "run:r1", "summary": summary, "body": {"ok": True}}


@pytest.mark.parametrize(
    "given",
    ["../../x", "a\x1b[2Jb", "", " ", "x" * 200, 7, None, ["id"], "a/b", ".hidden"],
    ids=["dotdot", "escape", "empty", "space", "long", "int", "null", "list", "slash", "dot"],
)
def test_a_session_id_that_is_no_id_registers_nothing(home: StateRoot, given: Any) -> None:
    done = hook("pi-session-start", {"session_id": given})
    assert done.stdout == ""
    assert not (home.path / "sessions").exists() or list((home.path / "sessions").iterdir()) == []


def test_bad_input_is_no_input(home: StateRoot) -> None:
    for raw in ("not json", "[1, 2]", '{"session_id": ' * 500, "\x00\xff"):
        assert hook("pi-session-start", None, raw=raw).stdout == ""
        assert hook("pi-wake", None, raw=raw).stdout == ""


def test_session_start_registers_the_pi_session_and_its_wake_file(home: StateRoot) -> None:
    answer = start()
    session = f"pi-{PI_ID}"
    assert answer == {"session": session, "wake": str(session_paths(home, session).wake)}
    record = load_session(home, session)
    assert record["harness"] == "pi_tui" and record["registered"] and record["cwd"] == "/proj"
    assert Path(answer["wake"]).is_file()
    # the process that ran the hook (here: this test's Python) now serves the session
    key = next(p for p in home.harness_processes.iterdir() if p.name.startswith(f"{os.getpid()}-"))
    assert json.loads(key.read_text()) == {"session": session}


def test_a_planted_wake_link_is_not_followed(home: StateRoot, tmp_path: Path) -> None:
    session = f"pi-{PI_ID}"
    paths = session_paths(home, session)
    paths.dir.mkdir(parents=True)
    os.chmod(home.path, 0o700)
    target = tmp_path / "victim"
    target.write_text("mine\n")
    paths.wake.symlink_to(target)
    start()
    assert target.read_text() == "mine\n" and paths.wake.is_symlink()


def test_a_new_session_in_the_same_pi_succeeds_the_old_one(home: StateRoot) -> None:
    """`/new` or `/resume` in a running pi: the same process's record names the session
    it served, so the new one takes over its runs and unread follow-ups."""
    start()
    old = f"pi-{PI_ID}"
    DeliveryRunner(home).submit(old, envelope("Run r1 done TOKEN-OLD"), delivery_id="d-old")
    new_id = "01a21e36-61a0-73f5-be50-000000000002"
    start(new_id)
    new = f"pi-{new_id}"
    assert load_session(home, new)["predecessors"] == [old]
    assert load_session(home, old)["successor"] == new
    assert [e["id"] for e in SessionInbox(session_paths(home, new)).unread()] == ["d-old"]


def test_wake_hands_each_follow_up_over_once_fenced_and_inert(home: StateRoot) -> None:
    session = start()["session"]
    runner = DeliveryRunner(home)
    runner.submit(session, envelope("Run r1 done \x1b]0;pwned\x07 TOKEN-A"), delivery_id="d-a")
    runner.submit(session, envelope("held TOKEN-M"), delivery_id="d-m", mode="manual")
    answer = json.loads(hook("pi-wake", {"session": session}).stdout)
    text = answer["text"]
    assert answer["deliver_as"] == "steer"  # an immediate follow-up steers a busy pi
    assert "TOKEN-A" in text and "<run-data nonce=" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "TOKEN-M" not in text, "a manual follow-up waits for `actors flush`"
    assert hook("pi-wake", {"session": session}).stdout == ""  # read: never again
    paths = session_paths(home, session)
    journal = read_jsonl(paths.deliveries).records
    surfaced = [r for r in journal if r["id"] == "d-a" and r["event"] == "delivered"]
    assert [(r.get("metadata") or {}).get("boundary") for r in surfaced][-1] == "pi extension"
    assert [w.get("via") for w in read_jsonl(paths.wakes).records] == ["pi extension"]
    assert [e["id"] for e in SessionInbox(paths).unread()] == ["d-m"]


def test_wake_refuses_a_session_that_is_not_a_pi_one(home: StateRoot) -> None:
    runner = DeliveryRunner(home)
    cli("session", "register", "--harness", "file", "--id", "other")
    runner.submit("other", envelope("Run r1 done TOKEN-X"), delivery_id="d-x")
    assert hook("pi-wake", {"session": "other"}).stdout == ""
    assert [e["id"] for e in SessionInbox(session_paths(home, "other")).unread()] == ["d-x"]


def test_serve_answers_every_request_line_once_with_its_seq(home: StateRoot) -> None:
    session = start()["session"]
    DeliveryRunner(home).submit(session, envelope("Run r1 done TOKEN-S"), delivery_id="d-s")
    lines = [
        {"seq": 1, "session": session},
        {"seq": 2, "session": session},
        "not json",
        {"seq": True, "session": session},
        {"seq": 5, "session": "../etc"},
    ]
    given = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    done = subprocess.run(
        [sys.executable, "-m", "actors", "hook", "pi-serve"],
        input=given,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["seq"] for a in answers] == [1, 2, None, None, 5]
    assert "TOKEN-S" in answers[0]["text"]
    assert all("text" not in a for a in answers[1:])

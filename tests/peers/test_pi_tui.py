"""A user's own interactive pi (1.x), reached through the actors pi extension.

Set up only as docs/harnesses.md says: the real `actors install pi --user` (the extension
and the MCP entry) into pi's throw-away agent dir, then `pi` started in a tmux pane as a
user starts it; no `actors session register` and no host process of ours: the extension
registers the session, and a run's follow-up wakes the idle pi by itself. The fake model
answers `[tool:NAME:ARG]` with a tool call (pi names MCP tools `mcp__actors__<tool>`);
what a tool returned, or what woke pi, is read from the model's next request.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import actors
from runtime.delivery.sessions import SessionInbox, load_session
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import cli, finished, wait_for_change
from tests.peers.conftest import doctor_verdicts, peer_bin
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.run_pi import TUI_FLAGS, PiTui, pi_tui, pi_user_env

FENCE = re.compile(r"<run-data nonce=(\w+)>\n(.*?)\n</run-data nonce=\1>", re.S)


def tool_output(body: dict[str, Any]) -> str | None:
    """What a tool gave the model: the `tool` message that ends a Chat Completions
    request (None for a request that does not carry a fresh tool result)."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    if last.get("role") != "tool":
        return None
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def call_tool(pi: PiTui, llm: FakeLLM, tool: str, args: dict[str, Any]) -> str:
    """Type a prompt whose model calls `mcp__actors__<tool>`; what the model got back."""
    start = len(llm.requests)
    pi.type(f"[tool:mcp__actors__{tool}:{json.dumps(args)}]")
    answered = llm.wait_request(lambda r: tool_output(r["body"]) is not None, start, timeout=60)
    return str(tool_output(answered["body"]))


def woken(llm: FakeLLM, token: str, start: int = 0) -> dict[str, Any]:
    """The body of the model request whose user message carries `token` fenced (the
    woken turn), not as typed in a prompt."""

    def fenced(request: dict[str, Any]) -> bool:
        found = FENCE.search(last_user_text(request["body"]))
        return found is not None and token in found.group(2)

    body: dict[str, Any] = llm.wait_request(fenced, start, timeout=60)["body"]
    return body


def woken_by(llm: FakeLLM, token: str, start: int = 0) -> str:
    """The user message of the woken turn that carries `token` fenced."""
    return last_user_text(woken(llm, token, start))


def delivered(home: StateRoot, session: str, delivery_id: str) -> list[dict[str, Any]]:
    journal = read_jsonl(session_paths(home, session).deliveries).records
    return [r for r in journal if r.get("id") == delivery_id and r.get("event") == "delivered"]


def test_a_runs_follow_up_wakes_the_idle_pi_once_fenced(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        record = load_session(home, pi.session)
        assert record["harness"] == "pi_tui" and record["cwd"] == str(tmp_path / "pi" / "proj")
        assert fake_llm.requests == []  # idle: nobody typed, nothing asked the model
        first = actors.spawn(template="echo TOKEN-PI-IDLE", session=pi.session)
        finished(dict(actors.wait(first["run"], timeout=30)))
        text = woken_by(fake_llm, "TOKEN-PI-IDLE")
        fenced = FENCE.search(text)
        assert fenced and "TOKEN-PI-IDLE" in fenced.group(2), text
        assert text.index("[actors]") < fenced.start(), "our head line, then the fenced data"
        paths = session_paths(home, pi.session)
        assert SessionInbox(paths).unread() == []
        (entry,) = [e for e in read_jsonl(paths.inbox).records if e.get("state") == "read"]
        assert len(delivered(home, pi.session, entry["id"])) == 2  # the runner's, the hand-over's
        wakes = read_jsonl(paths.wakes).records
        assert [w["via"] for w in wakes if entry["id"] in w["ids"]] == ["pi extension"]

        start = len(fake_llm.requests)
        second = actors.spawn(template="echo TOKEN-PI-TWO", session=pi.session)
        finished(dict(actors.wait(second["run"], timeout=30)))
        text = woken_by(fake_llm, "TOKEN-PI-TWO", start)
        assert "TOKEN-PI-IDLE" not in text, "the first follow-up was handed over again"


def test_a_busy_pi_gets_the_follow_up_once_in_the_running_conversation(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A follow-up that arrives while the user's turn runs is handed over at once (read)
    and queued inside pi (`steer`): the model gets it in that conversation, once."""
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        pi.type("[gate:busy] TOKEN-PI-BUSY")
        fake_llm.wait_request(lambda r: "TOKEN-PI-BUSY" in last_user_text(r["body"]), timeout=60)
        paths = session_paths(home, pi.session)
        run = actors.spawn(template="echo TOKEN-PI-STEER", session=pi.session)
        finished(dict(actors.wait(run["run"], timeout=30)))
        wait_for_change(
            paths.dir, lambda: (paths.wakes.exists() and SessionInbox(paths).unread() == []),
            timeout=30, what="handed over while pi is busy",
        )  # fmt: skip
        start = len(fake_llm.requests)
        fake_llm.release("busy")
        request = woken(fake_llm, "TOKEN-PI-STEER", start)
        assert "TOKEN-PI-BUSY" in json.dumps(request["messages"][:-1]), "same conversation"
        carrying = [r for r in fake_llm.requests if FENCE.search(last_user_text(r["body"]))]
        assert len(carrying) == 1, [last_user_text(r["body"])[:80] for r in carrying]


def test_a_backlog_larger_than_one_message_comes_in_several(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """One wake-file change, three follow-ups of ~5,000 characters (one hand-over holds
    ~9,000): the extension asks again until nothing is left, each sent once."""
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        inbox = SessionInbox(session_paths(home, pi.session))
        for n in range(3):
            big: dict[str, Any] = {"type": "run.done", "from": "run:big", "summary": f"Run big TOKEN-BIG-{n}",
                   "body": {"log": "x" * 5000}}  # fmt: skip
            inbox.append(f"d-big-{n}", big, "on-idle")
        inbox.ring_wake("d-big-2")  # one change for all three
        for n in range(3):
            woken_by(fake_llm, f"TOKEN-BIG-{n}")
        assert inbox.unread() == []
        texts = [last_user_text(r["body"]) for r in fake_llm.requests]
        for n in range(3):
            assert sum(f"TOKEN-BIG-{n}" in t and "<run-data" in t for t in texts) == 1, n


def test_after_new_the_old_sessions_run_wakes_the_new_session(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """`/new` in the running pi: the extension registers the new session, which succeeds
    the old one (the same pi process), so a run the old one started reports to it."""
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        old = pi.session
        fifo = tmp_path / "go"
        os.mkfifo(fifo)
        run = actors.spawn(template=f"sh -c 'cat {fifo} && echo TOKEN-PI-NEW'", session=old)
        pi.type("/new")
        new: list[str] = []

        def succeeded() -> bool:
            successor = load_session(home, old).get("successor")
            new[:] = [successor] if isinstance(successor, str) else []
            return bool(new)

        wait_for_change(home.path, succeeded, timeout=30, what="the session after /new")
        assert load_session(home, new[0])["predecessors"] == [old]
        with open(fifo, "w") as go:
            go.write("go\n")
        finished(dict(actors.wait(run["run"], timeout=30)))
        text = woken_by(fake_llm, "TOKEN-PI-NEW")
        assert new[0] in text and old not in text.split("handed over")[0]


def test_the_model_spawns_and_reads_through_pis_own_mcp_client(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """No session given anywhere: `actors mcp` (started by pi) acts for the session of
    the pi process above it, recorded by the extension's session start."""
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        args = {"template": "echo TOKEN-PI-MCP", "as": "run:pi-mcp"}
        start = len(fake_llm.requests)
        seen = call_tool(pi, fake_llm, "spawn", args)
        assert "started run:pi-mcp" in seen and "do not poll" in seen, seen
        assert actors.status("pi-mcp")["owner_id"] == pi.session
        finished(dict(actors.wait("pi-mcp", timeout=30)))
        woken_by(fake_llm, "TOKEN-PI-MCP", start)
        seen = call_tool(pi, fake_llm, "inbox_read", {})
        assert seen == "0 unread follow-up(s)", seen  # handed over once, as the woken turn


def test_doctor_reports_pi_tui_levels(home: StateRoot, tmp_path: Path, fake_llm: FakeLLM) -> None:
    with pi_tui(tmp_path / "pi", fake_llm.port) as pi:
        proc = cli("doctor", "delivery", "--session", pi.session)
    assert "harness=pi_tui" in proc.stdout, proc.stdout + proc.stderr
    verdicts = doctor_verdicts(proc.stdout, "pi")  # harness pi_tui: its own row
    for level in ("D1", "D2", "D3", "D4", "D5", "D6", "D8"):
        assert verdicts[level] == "pass", proc.stdout


def test_a_pi_in_print_mode_is_left_alone(
    home: StateRoot, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """`pi -p` (an `agent` subagent run) answers once and exits: the installed extension
    registers nothing there and keeps no process or watch alive (pi exits at once)."""
    env = pi_user_env(tmp_path / "pi", fake_llm.port)
    done = subprocess.run(
        [str(peer_bin("pi")), *TUI_FLAGS, "-p", "hello TOKEN-PI-PRINT"],
        cwd=tmp_path / "pi" / "proj",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ACK TOKEN-PI-PRINT" in done.stdout
    sessions = home.path / "sessions"
    pis = (
        [p.name for p in sessions.iterdir() if p.name.startswith("pi-")]
        if sessions.exists()
        else []
    )
    assert pis == []

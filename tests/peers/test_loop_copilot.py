"""The coordinator loop through the real GitHub Copilot CLI (headless, offline BYOK): the
model calls actors' MCP tools, and a run's follow-up reaches the same session at its next
turn end.

Set up exactly as docs/harnesses.md says for Copilot CLI: the real `actors install
copilot --user` (our MCP server under `mcpServers` in `~/.copilot/mcp-config.json`, our
agentStop hook in `~/.copilot/hooks/actors.json`), a registered `file` session named by
`ACTORS_SESSION` where Copilot starts, and nothing else of ours; or without that session
and variable at all (Copilot's own session id is then the session). Copilot ends its MCP
servers by killing their whole process tree: the run outliving it is part of the proof. Copilot names MCP tools
`SERVER-TOOL` (`actors-spawn`) and, under `--allow-all-tools`, runs them unasked. Each
`copilot -p` (`--continue` after the first) is one turn of the same Copilot session, with
no process between them. The session the MCP server acts for is the harness's (the
environment Copilot started it with), never an argument the model wrote. The proof is on
what the model was sent (the fake model's request bodies, the `tool` messages carrying
our tools' answers), on Copilot's own agentStop inputs and on the runs' and the session's
records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.fake_llm import FakeLLM, last_user_text, tool_answers
from tests.peers.hooked import handed_over, wait_in_inbox
from tests.peers.run_copilot import Copilot

SESSION = "cop-loop"


def call(tool: str, arguments: dict[str, Any]) -> str:
    """The fake model's marker for one call of our `tool` as Copilot names it."""
    return f"[tool:actors-{tool}:{json.dumps(arguments)}]"


def test_spawn_through_mcp_then_the_follow_up_at_the_next_turn_end(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    done = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert done.returncode == 0, done.stderr
    copilot = Copilot(tmp_path / "copilot", fake_llm.port, home.path, SESSION).setup()
    config = json.loads((copilot.home / ".copilot" / "mcp-config.json").read_text())
    assert config["mcpServers"]["actors"]["args"][-1] == "mcp"  # the installer's entry

    # Turn 1: the model spawns a run through MCP, and tries to name another session for
    # a second one (the tool has no such argument: refused, nothing started). The first
    # run waits for messages, so the turn ends with it still going (agentStop: nothing
    # pending, the model stops).
    spawn = {"recipe": "player", "as": "run:cloop1"}
    other = {"recipe": "player", "as": "run:cloop2", "session": "someone-else"}
    copilot.run(f"{call('spawn', spawn)} {call('spawn', other)} TOKEN-T1")
    (answered,) = [r for r in fake_llm.requests if tool_answers(r["body"])]
    started, refused = tool_answers(answered["body"])
    assert "started run:cloop1" in started, started
    assert "session" in refused and "started" not in refused, refused
    assert [r["run"] for r in actors.runs()] == ["cloop1"]
    status = actors.status("cloop1")
    assert status["owner_id"] == SESSION, status
    assert status["status"] == "running"
    assert [i["stop_hook_active"] for i in copilot.hook_inputs()] == [False]
    assert len(fake_llm.requests) == 2  # the calls, then the ACK after their answers

    # While Copilot is idle (no process), the run gets its message and ends; its
    # follow-up waits in the session's inbox.
    actors.message("run:cloop1", "player.stop", session=SESSION)
    finished(actors.status("cloop1"))
    wait_in_inbox(home, SESSION, "cloop1")

    # Turn 2 of the same Copilot session: at its end the agentStop hook hands the
    # follow-up over as the next prompt, once, fenced as data; the model reads it there.
    start = len(fake_llm.requests)
    copilot.run("next TOKEN-T2", resume=True)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2, prompts
    assert "TOKEN-T2" in prompts[0] and "cloop1" not in prompts[0]
    assert "cloop1" in prompts[1] and "<run-data" in prompts[1], prompts[1]
    assert "TOKEN-T1" in json.dumps(fake_llm.requests[-1]["body"])  # the resumed session
    inputs = copilot.hook_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, False, True]
    assert len({i["sessionId"] for i in inputs}) == 1  # one Copilot session throughout
    (record,) = handed_over(home, SESSION, "copilot_cli")
    assert record["metadata"]["boundary"] == "agentStop", record

    # Turn 3: the model reads the ended run's status and the (now empty) inbox through
    # MCP, as the same session.
    start = len(fake_llm.requests)
    copilot.run(f"{call('status', {'run': 'run:cloop1'})} {call('inbox_read', {})}", resume=True)
    assert len(fake_llm.requests) == start + 2  # the calls, then the ACK after them
    looked, read = tool_answers(fake_llm.requests[-1]["body"])[-2:]  # turn 1's came first
    assert "cloop1" in looked and "done" in looked, looked
    assert "0 unread follow-up(s)" in read, read
    assert len(handed_over(home, SESSION, "copilot_cli")) == 1
    assert sum("cloop1" in p and "<run-data" in p for p in fake_llm.prompts()) == 1


def test_without_actors_session_the_session_is_copilots_own(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """No ACTORS_SESSION and no `actors session register`: Copilot gives `actors mcp` its
    session id (COPILOT_AGENT_SESSION_ID) and its agentStop hook the same one
    (`sessionId`), so a run the model spawns belongs to that Copilot session and its
    follow-up comes back to it (actors.mcp_session.harness_session)."""
    copilot = Copilot(tmp_path / "copilot", fake_llm.port, home.path, "").setup()
    copilot.run(f"{call('spawn', {'recipe': 'player', 'as': 'run:cown'})} TOKEN-T1")
    (copilot_session,) = {i["sessionId"] for i in copilot.hook_inputs()}
    assert actors.status("cown")["owner_id"] == copilot_session
    actors.message("run:cown", "player.stop", session=copilot_session)
    finished(actors.status("cown"))
    wait_in_inbox(home, copilot_session, "cown")

    start = len(fake_llm.requests)
    copilot.run("next TOKEN-T2", resume=True)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2 and "cown" in prompts[1] and "<run-data" in prompts[1], prompts
    assert {i["sessionId"] for i in copilot.hook_inputs()} == {copilot_session}
    assert len(handed_over(home, copilot_session, "copilot_cli")) == 1

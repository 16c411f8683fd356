"""The coordinator loop through the real Qwen Code (headless, offline): the model calls
actors' MCP tools, and a run's follow-up reaches the same session at its next turn end.

Set up exactly as docs/harnesses.md says for a headless Qwen Code: the real `actors
install qwen-code --user` (our MCP server under `mcpServers` and our Stop hook in
`~/.qwen/settings.json`), a registered `file` session named by `ACTORS_SESSION` where
Qwen starts, and nothing else of ours; or without that session and variable at all
(Qwen's own session id is then the session). Qwen defers MCP tools: the model sees only their
names (`mcp__actors__spawn`, ...) and calls them through Qwen's own `tool_call` tool;
`--allowed-tools` lets headless Qwen run exactly those without asking. Each `qwen -p`
(`--continue` after the first) is one turn of the same Qwen session, with no process
between them. The session the MCP server acts for is the harness's (the environment Qwen
started it with), never an argument the model wrote. The proof is on what the model was
sent (the fake model's request bodies, the `tool` messages carrying our tools' answers),
on Qwen's own Stop inputs and on the runs' and the session's records.
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
from tests.peers.run_qwen import Qwen

SESSION = "qwen-loop"
ALLOWED = ("--allowed-tools", "mcp__actors__spawn,mcp__actors__status,mcp__actors__inbox_read")


def call(tool: str, arguments: dict[str, Any]) -> str:
    """The fake model's marker for one call of our `tool` through Qwen's `tool_call`."""
    named = {"name": f"mcp__actors__{tool}", "arguments": arguments}
    return f"[tool:tool_call:{json.dumps(named)}]"


def test_spawn_through_mcp_then_the_follow_up_at_the_next_turn_end(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    done = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert done.returncode == 0, done.stderr
    qwen = Qwen(tmp_path / "qwen", fake_llm.port, home.path, SESSION).setup()
    settings = json.loads((qwen.home / ".qwen" / "settings.json").read_text())
    assert settings["mcpServers"]["actors"]["args"][-1] == "mcp"  # the installer's entry

    # Turn 1: the model spawns a run through MCP, and tries to name another session for
    # a second one (our schema has no such argument: Qwen refuses the call against it,
    # nothing started). The first run waits for messages, so the turn ends with it still
    # going (Stop: nothing pending, the model stops).
    spawn = {"recipe": "player", "as": "run:qloop1"}
    other = {"recipe": "player", "as": "run:qloop2", "session": "someone-else"}
    qwen.run(f"{call('spawn', spawn)} {call('spawn', other)} TOKEN-T1", extra=ALLOWED)
    (answered,) = [r for r in fake_llm.requests if tool_answers(r["body"])]
    seen, refused = tool_answers(answered["body"])
    assert "started run:qloop1" in seen, seen
    assert "additional properties" in refused and "started" not in refused, refused
    assert [r["run"] for r in actors.runs()] == ["qloop1"]
    status = actors.status("qloop1")
    assert status["owner_id"] == SESSION, status
    assert status["status"] == "running"
    assert [i["stop_hook_active"] for i in qwen.hook_inputs()] == [False]
    assert len(fake_llm.requests) == 2  # the calls, then the ACK after their answers

    # While Qwen is idle (no process), the run gets its message and ends; its follow-up
    # waits in the session's inbox.
    actors.message("run:qloop1", "player.stop", session=SESSION)
    finished(actors.status("qloop1"))
    wait_in_inbox(home, SESSION, "qloop1")

    # Turn 2 of the same Qwen session: at its end the Stop hook hands the follow-up over
    # as the next prompt, once, fenced as data; the model reads it there.
    start = len(fake_llm.requests)
    qwen.run("next TOKEN-T2", resume=True, extra=ALLOWED)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2, prompts
    assert "TOKEN-T2" in prompts[0] and "qloop1" not in prompts[0]
    assert "qloop1" in prompts[1] and "<run-data" in prompts[1], prompts[1]
    assert "TOKEN-T1" in json.dumps(fake_llm.requests[-1]["body"])  # the resumed session
    inputs = qwen.hook_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, False, True]
    assert len({i["session_id"] for i in inputs}) == 1  # one Qwen session throughout
    (record,) = handed_over(home, SESSION, "qwen_code")
    assert record["metadata"]["boundary"] == "Stop", record

    # Turn 3: the model reads the ended run's status and the (now empty) inbox through
    # MCP, as the same session.
    start = len(fake_llm.requests)
    qwen.run(
        f"{call('status', {'run': 'run:qloop1'})} {call('inbox_read', {})}",
        resume=True,
        extra=ALLOWED,
    )
    assert len(fake_llm.requests) == start + 2  # the calls, then the ACK after them
    looked, read = tool_answers(fake_llm.requests[-1]["body"])[-2:]  # turn 1's came first
    assert "qloop1" in looked and "done" in looked, looked
    assert "0 unread follow-up(s)" in read, read
    assert len(handed_over(home, SESSION, "qwen_code")) == 1
    assert sum("qloop1" in p and "<run-data" in p for p in fake_llm.prompts()) == 1


def test_without_actors_session_the_session_is_qwens_own(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """No ACTORS_SESSION and no `actors session register`: Qwen gives `actors mcp` its
    session id (QWEN_CODE_SESSION_ID) and its Stop hook the same one (`session_id`), so a
    run the model spawns belongs to that Qwen session and its follow-up comes back to it
    (actors.mcp_session.harness_session)."""
    qwen = Qwen(tmp_path / "qwen", fake_llm.port, home.path, "").setup()
    qwen.run(f"{call('spawn', {'recipe': 'player', 'as': 'run:qown'})} TOKEN-T1", extra=ALLOWED)
    (qwen_session,) = {i["session_id"] for i in qwen.hook_inputs()}
    assert actors.status("qown")["owner_id"] == qwen_session
    actors.message("run:qown", "player.stop", session=qwen_session)
    finished(actors.status("qown"))
    wait_in_inbox(home, qwen_session, "qown")

    start = len(fake_llm.requests)
    qwen.run("next TOKEN-T2", resume=True, extra=ALLOWED)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2 and "qown" in prompts[1] and "<run-data" in prompts[1], prompts
    assert {i["session_id"] for i in qwen.hook_inputs()} == {qwen_session}
    assert len(handed_over(home, qwen_session, "qwen_code")) == 1

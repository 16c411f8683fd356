"""The coordinator loop through the real Qwen Code and GitHub Copilot CLI (headless,
offline against the fake model): the model calls actors' MCP tools, and a run's
follow-up reaches the same session at its next turn end.

Each harness is set up exactly as docs/harnesses.md says: the real `actors install
qwen-code|copilot --user` (our MCP server under `mcpServers`, our turn-end hook: Qwen's
Stop in `~/.qwen/settings.json`, Copilot's agentStop in `~/.copilot/hooks/actors.json`),
a registered `file` session named by `ACTORS_SESSION` where the harness starts, and
nothing else of ours; or without that session and variable at all (the harness's own
session id is then the session: QWEN_CODE_SESSION_ID / COPILOT_AGENT_SESSION_ID, which
its hook gets too). Each `-p` turn (`--continue` after the first) is one turn of the same
session with no process between them. The session the MCP server acts for is the
harness's (the environment it started the server with), never an argument the model
wrote. Qwen defers MCP tools (the model sees their names and calls them through Qwen's
own `tool_call`; `--allowed-tools` lets headless Qwen run exactly those); Copilot names
them `SERVER-TOOL` and runs them under `--allow-all-tools`, and ends its MCP servers by
killing their whole process tree, so the run outliving that is part of the proof. The
proof is on what the model was sent (the fake model's request bodies, the `tool`
messages carrying our tools' answers), on the harness's own hook inputs and on the runs'
and the session's records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.fake_llm import FakeLLM, last_user_text, tool_answers
from tests.peers.hooked import handed_over, wait_in_inbox
from tests.peers.run_copilot import Copilot
from tests.peers.run_qwen import Qwen

QWEN_TOOLS = ("--allowed-tools", "mcp__actors__spawn,mcp__actors__status,mcp__actors__inbox_read")


def _qwen_call(tool: str, arguments: dict[str, Any]) -> str:
    named = {"name": f"mcp__actors__{tool}", "arguments": arguments}
    return f"[tool:tool_call:{json.dumps(named)}]"


def _copilot_call(tool: str, arguments: dict[str, Any]) -> str:
    return f"[tool:actors-{tool}:{json.dumps(arguments)}]"


class Loop(NamedTuple):
    """What differs between the harnesses; the loop below is the same for both."""

    harness: Callable[[Path, int, Path, str], Any]
    """Its driver (tests/peers/run_*.py): (directory, fake model port, root, session)."""
    mcp_config: str
    """Where the installer put `mcpServers`, under the harness's home."""
    call: Callable[[str, dict[str, Any]], str]
    """The fake model's marker for one call of our tool as the harness names it."""
    refusal: str
    """What the harness answers a call with an argument our schema lacks."""
    session_key: str
    """The session id's key in the harness's hook input."""
    adapter: str
    """The adapter the hand-over is journaled under."""
    boundary: str
    """The harness's hook that hands the follow-up over."""
    prefix: str
    """Of the run ids (`<prefix>loop1`)."""
    flags: tuple[str, ...] = ()
    """What every turn is started with."""

    def turn(self, driver: Any, prompt: str, *, resume: bool = False) -> None:
        if self.flags:
            driver.run(prompt, resume=resume, extra=self.flags)
        else:
            driver.run(prompt, resume=resume)


LOOPS = {
    "qwen": Loop(
        Qwen,
        ".qwen/settings.json",
        _qwen_call,
        "additional properties",
        "session_id",
        "qwen_code",
        "Stop",
        "q",
        QWEN_TOOLS,
    ),
    "copilot": Loop(
        Copilot,
        ".copilot/mcp-config.json",
        _copilot_call,
        "session",
        "sessionId",
        "copilot_cli",
        "agentStop",
        "c",
    ),
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_spawn_through_mcp_then_the_follow_up_at_the_next_turn_end(
    name: str, home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    loop, session = LOOPS[name], f"{name}-loop"
    run, other_run = f"{loop.prefix}loop1", f"{loop.prefix}loop2"
    done = cli("session", "register", "--harness", "file", "--id", session)
    assert done.returncode == 0, done.stderr
    driver = loop.harness(tmp_path / name, fake_llm.port, home.path, session).setup()
    config = json.loads((driver.home / loop.mcp_config).read_text())
    assert config["mcpServers"]["actors"]["args"][-1] == "mcp"  # the installer's entry

    # Turn 1: the model spawns a run through MCP, and tries to name another session for
    # a second one (our schema has no such argument: refused, nothing started). The
    # first run waits for messages, so the turn ends with it still going (the turn-end
    # hook: nothing pending, the model stops).
    spawn = {"recipe": "player", "as": f"run:{run}"}
    other = {"recipe": "player", "as": f"run:{other_run}", "session": "someone-else"}
    loop.turn(driver, f"{loop.call('spawn', spawn)} {loop.call('spawn', other)} TOKEN-T1")
    (answered,) = [r for r in fake_llm.requests if tool_answers(r["body"])]
    started, refused = tool_answers(answered["body"])
    assert f"started run:{run}" in started, started
    assert loop.refusal in refused and "started" not in refused, refused
    assert [r["run"] for r in actors.runs()] == [run]
    status = actors.status(run)
    assert status["owner_id"] == session, status
    assert status["status"] == "running"
    assert [i["stop_hook_active"] for i in driver.hook_inputs()] == [False]
    assert len(fake_llm.requests) == 2  # the calls, then the ACK after their answers

    # While the harness is idle (no process), the run gets its message and ends; its
    # follow-up waits in the session's inbox.
    actors.message(f"run:{run}", "player.stop", session=session)
    finished(actors.status(run))
    wait_in_inbox(home, session, run)

    # Turn 2 of the same session: at its end the hook hands the follow-up over as the
    # next prompt, once, fenced as data; the model reads it there.
    start = len(fake_llm.requests)
    loop.turn(driver, "next TOKEN-T2", resume=True)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2, prompts
    assert "TOKEN-T2" in prompts[0] and run not in prompts[0]
    assert run in prompts[1] and "<run-data" in prompts[1], prompts[1]
    assert "TOKEN-T1" in json.dumps(fake_llm.requests[-1]["body"])  # the resumed session
    inputs = driver.hook_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, False, True]
    assert len({i[loop.session_key] for i in inputs}) == 1  # one session throughout
    (record,) = handed_over(home, session, loop.adapter)
    assert record["metadata"]["boundary"] == loop.boundary, record

    # Turn 3: the model reads the ended run's status and the (now empty) inbox through
    # MCP, as the same session.
    start = len(fake_llm.requests)
    looks = f"{loop.call('status', {'run': f'run:{run}'})} {loop.call('inbox_read', {})}"
    loop.turn(driver, looks, resume=True)
    assert len(fake_llm.requests) == start + 2  # the calls, then the ACK after them
    looked, read = tool_answers(fake_llm.requests[-1]["body"])[-2:]  # turn 1's came first
    assert run in looked and "done" in looked, looked
    assert "0 unread follow-up(s)" in read, read
    assert len(handed_over(home, session, loop.adapter)) == 1
    assert sum(run in p and "<run-data" in p for p in fake_llm.prompts()) == 1


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_without_actors_session_the_session_is_the_harnesss_own(
    name: str, home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """No ACTORS_SESSION and no `actors session register`: the harness gives `actors mcp`
    its session id and its turn-end hook the same one, so a run the model spawns belongs
    to that session and its follow-up comes back to it
    (actors.mcp_session.harness_session)."""
    loop = LOOPS[name]
    run = f"{loop.prefix}own"
    driver = loop.harness(tmp_path / name, fake_llm.port, home.path, "").setup()
    loop.turn(driver, f"{loop.call('spawn', {'recipe': 'player', 'as': f'run:{run}'})} TOKEN-T1")
    (own,) = {i[loop.session_key] for i in driver.hook_inputs()}
    assert actors.status(run)["owner_id"] == own
    actors.message(f"run:{run}", "player.stop", session=own)
    finished(actors.status(run))
    wait_in_inbox(home, own, run)

    start = len(fake_llm.requests)
    loop.turn(driver, "next TOKEN-T2", resume=True)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2 and run in prompts[1] and "<run-data" in prompts[1], prompts
    assert {i[loop.session_key] for i in driver.hook_inputs()} == {own}
    assert len(handed_over(home, own, loop.adapter)) == 1

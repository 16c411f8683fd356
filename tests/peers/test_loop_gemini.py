"""The coordinator loop through the real Gemini CLI (headless, offline): the model calls
actors' MCP tools, and a run's follow-up reaches the idle session at its next turn end.

Set up exactly as docs/harnesses.md says for Gemini CLI (no installer writes Gemini's
config): a registered `file` session named by `ACTORS_SESSION`, the AfterAgent hook
`actors hook gemini-after-agent`, and `actors mcp` under `mcpServers` in
`~/.gemini/settings.json` (`trust: true`, so `gemini -p` runs our tools without asking).
Gemini has no idle wake: each `gemini -p --resume latest` is one turn of the same session,
and between them the session is idle with no process at all. The proof is on what the
model was sent (the fake model's request bodies, Gemini's `functionResponse` parts), on
Gemini's own AfterAgent inputs and on the runs' records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.peers.fake_llm import FakeLLM, last_user_text
from tests.peers.hooked import wait_in_inbox
from tests.peers.run_gemini import Gemini

SESSION = "gem-loop"


def function_responses(body: dict[str, Any]) -> list[str]:
    """What each of our tools returned, as Gemini sent it back to the model."""
    out = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if isinstance(part, dict) and "functionResponse" in part:
                out.append(json.dumps(part["functionResponse"]))
    return out


def player_summaries(run: str) -> list[str]:
    view = json.loads(cli("inspect", f"run:{run}", "--view", "messages", "--json").stdout)
    return [m["summary"] for m in view["messages"] if m["type"] == "player.track"]


def pending(home: StateRoot, text: str, timeout: float = 60) -> str:
    """The session's unread follow-ups (peeked) once one mentioning `text` is in its
    inbox (woken by the inbox file's writes, bounded by `timeout`)."""
    wait_in_inbox(home, SESSION, text, timeout)
    return cli("inbox", "read", "--session", SESSION, "--peek").stdout


def test_spawn_follow_up_at_turn_end_then_message_a_live_run(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    done = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert done.returncode == 0, done.stderr
    # A live run of this session, which the model will drive (its track news go to its
    # outbox, not to the session).
    player = actors.spawn(recipe="player", as_="run:gplayer", session=SESSION)
    gemini = Gemini(tmp_path / "gemini", fake_llm.port, home.path, SESSION, mcp=True).setup()

    # Turn 1: the model spawns a run through MCP; the run waits for messages, so the
    # turn ends with the run still going (AfterAgent: nothing pending, the model stops).
    spawn = {"recipe": "player", "as": "run:gem1"}
    gemini.run(f"[tool:mcp_actors_spawn:{json.dumps(spawn)}] TOKEN-T1")
    (answered,) = [r for r in fake_llm.requests if function_responses(r["body"])]
    (seen,) = function_responses(answered["body"])
    assert "started run:gem1" in seen, seen
    assert actors.status("gem1")["owner_id"] == SESSION
    assert actors.status("gem1")["status"] == "running"
    assert [i["stop_hook_active"] for i in gemini.hook_inputs()] == [False]
    assert len(fake_llm.requests) == 2  # the call, then the ACK after its response

    # While Gemini is idle (no process), the run gets its message and ends.
    actors.message("run:gem1", "player.stop", session=SESSION)
    finished(actors.status("gem1"))
    assert "gem1" in pending(home, "gem1")

    # Turn 2 of the same session: at its end the hook hands the follow-up over as the
    # next prompt, once; the model reads it there.
    start = len(fake_llm.requests)
    gemini.run("next TOKEN-T2", resume=True)
    prompts = [last_user_text(r["body"]) for r in fake_llm.requests[start:]]
    assert len(prompts) == 2, prompts
    assert "TOKEN-T2" in prompts[0] and "gem1" not in prompts[0]
    assert "gem1" in prompts[1], prompts[1]
    assert "TOKEN-T1" in json.dumps(fake_llm.requests[-1]["body"])  # the resumed session
    assert [i["stop_hook_active"] for i in gemini.hook_inputs()] == [False, False, True]
    assert cli("inbox", "read", "--session", SESSION).stdout == "0 unread follow-up(s)\n"

    # Turn 3: the model looks at the ended run and messages the live player through MCP,
    # and the player acts on it.
    start = len(fake_llm.requests)
    look = {"target": "run:gem1"}
    step = {"to": "run:gplayer", "type": "player.next"}
    gemini.run(
        f"[tool:mcp_actors_inspect:{json.dumps(look)}] "
        f"[tool:mcp_actors_message:{json.dumps(step)}]",
        resume=True,
    )
    assert len(fake_llm.requests) == start + 2  # the calls, then the ACK after them
    looked, sent = function_responses(fake_llm.requests[-1]["body"])[-2:]  # turn 1 came first
    assert "gem1" in looked and "done" in looked, looked
    assert "queued" in sent, sent
    actors.message("run:gplayer", "player.stop", session=SESSION)
    assert actors.wait(player["run"], timeout=60)["status"] == "done"
    assert player_summaries("gplayer") == ["playing: track 1 of 3", "playing: track 2 of 3"]


def test_gemini_runs_its_own_shell_and_file_tools_on_scripted_calls(
    home: StateRoot, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """The fake model's `functionCall` parts drive Gemini's built-in tools too: its shell
    tool runs a command and its file tools write and edit a file in the project."""
    gemini = Gemini(tmp_path / "gemini", fake_llm.port, home.path, SESSION).setup()
    proj = tmp_path / "gemini" / "proj"
    write = {"file_path": str(proj / "notes.txt"), "content": "alpha TOKEN-W\n"}
    gemini.run(
        f"[tool:run_shell_command:echo TOKEN-SH > {proj / 'shell.txt'}] "
        f"[tool:write_file:{json.dumps(write)}]",
        extra=("--approval-mode", "yolo"),
    )
    assert (proj / "shell.txt").read_text() == "TOKEN-SH\n"
    assert (proj / "notes.txt").read_text() == "alpha TOKEN-W\n"
    edit = {
        "file_path": str(proj / "notes.txt"),
        "old_string": "alpha",
        "new_string": "beta",
        "instruction": "rename",
    }
    gemini.run(f"[tool:replace:{json.dumps(edit)}]", extra=("--approval-mode", "yolo"))
    assert (proj / "notes.txt").read_text() == "beta TOKEN-W\n"
    answered = [r for r in fake_llm.requests if function_responses(r["body"])]
    assert len(answered) == 2, [r["body"] for r in fake_llm.requests]

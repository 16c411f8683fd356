"""The real Claude Code, configured by the real `actors install claude-code --user`.

Claude Code runs offline against the fake LLM (`run_claude.py`). Every test asserts on
what the model actually received (the fake LLM's request bodies) and on what Claude Code
and our state root stored. Claude Code's stream is started with `--include-hook-events`,
which only adds `hook_response` events (each FileChanged hook's exit code and stderr) to
its output; the tests wait on those events and on `result` events, never on a sleep.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from adapters.claude_code.hooks import CONTEXT
from runtime.core.ids import parse_iso
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished, wait_for_change
from tests.peers.conftest import PIN_IDS, PINS, doctor_verdicts, peer_bin
from tests.peers.fake_llm import FakeLLM, _text_of, last_user_text
from tests.peers.run_claude import DOORBELL_ONLY, ClaudeSession, Event, claude_session

DOORBELL = re.compile(r"ACTORS: (\d+) unread follow-up\(s\); first: (.*?)\. Read them all with: ")
WAKE_PREFIX = (
    "actors follow-ups arrived: "  # our rewakeMessage (see adapters/claude_code/install.py)
)
"""What asyncRewake puts before the hook's stderr (no `rewakeMessage` is configured)."""


@pytest.fixture
def claude(home: StateRoot, fake_llm: FakeLLM, tmp_path: Path) -> Iterator[ClaudeSession]:
    binary = peer_bin("claude")
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, settings=DOORBELL_ONLY
    ) as session:
        yield session


def _first_turn(claude: ClaudeSession, token: str = "TOKEN-FIRST") -> str:
    """Send the first user turn (which fires SessionStart); the Claude session id."""
    claude.send_user(f"hello {token}")
    result = claude.next_result(timeout=90)
    assert result["is_error"] is False, result
    assert result["result"] == f"ACK {token}"
    return str(result["session_id"])


def _all_text(body: dict[str, Any]) -> str:
    """Every text the model was given: the system prompt and all messages."""
    parts = [_text_of(body.get("system"))]
    for message in body.get("messages") or []:
        parts.append(_text_of(message.get("content")))
    return "\n".join(parts)


def _requests_since(llm: FakeLLM, start: int) -> list[dict[str, Any]]:
    return list(llm.requests[start:])


def _doorbells(llm: FakeLLM, start: int = 0) -> list[tuple[float, str]]:
    """(time, last user text) of each model request woken by our FileChanged hook."""
    out = []
    for request in _requests_since(llm, start):
        text = last_user_text(request["body"])
        if DOORBELL.search(text):
            out.append((float(request["ts"]), text))
    return out


def _wakes(claude: ClaudeSession, after: int = 0) -> list[Event]:
    """FileChanged hook runs that exited 2 (asyncRewake: each one wakes the model)."""
    return [e for e in claude.hook_responses("FileChanged", after) if e.get("exit_code") == 2]


def _is_wake_for(run_id: str) -> Callable[[Event], bool]:
    def match(event: Event) -> bool:
        return (
            event.get("subtype") == "hook_response"
            and event.get("hook_event") == "FileChanged"
            and event.get("exit_code") == 2
            and f'first: "Run {run_id} done: \\"' in str(event.get("stderr"))
            and f'; next: actors result {run_id}"' in str(event.get("stderr"))
        )

    return match


def _wait_request(
    llm: FakeLLM, predicate: Callable[[str], bool], start: int, timeout: float = 30
) -> dict[str, Any]:
    """The first model request since `start` whose last user text matches (woken by each
    request the fake model receives)."""
    return llm.wait_request(lambda r: predicate(last_user_text(r["body"])), start, timeout)


def _result_after_time(claude: ClaudeSession, moment: float, timeout: float = 30) -> Event:
    """The first `result` printed at or after `moment` (turns run one at a time, so that
    is the end of the turn whose model request was made at `moment`)."""
    index = next(
        (i for i, seen in enumerate(list(claude.received_at)) if seen >= moment),
        len(claude.received_at),
    )
    return claude.next_result(timeout=timeout, after=index)


def _result_after(claude: ClaudeSession, event: Event, timeout: float = 30) -> Event:
    """The first `result` after `event` in the stream (the turn that event started)."""
    index = claude.events.index(event)
    return claude.next_result(timeout=timeout, after=index + 1)


def test_session_start_hook_registers_the_session_and_its_context_reaches_the_model(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _first_turn(claude)
    paths = session_paths(home, session_id)

    # Our state root: the Claude session is registered under Claude's own session id.
    record = json.loads(paths.record.read_text())
    assert record["id"] == session_id
    assert record["harness"] == "claude_code" and record["registered"] is True
    assert record["cwd"] == str(claude.cwd)
    transcript = Path(record["transcript_path"])
    assert transcript.name == f"{session_id}.jsonl"
    assert transcript.parent.parent == claude.config_dir / "projects"
    assert paths.wake.is_file()

    # Claude Code ran our hook and took its output: watchPaths names the wake file.
    (started,) = claude.hook_responses("SessionStart")
    assert started.get("exit_code", 0) == 0
    output = json.loads(started["output"])["hookSpecificOutput"]
    assert output["watchPaths"] == [str(paths.wake)]

    # The model's first request carries our additionalContext, with this session's id.
    first = next(r for r in fake_llm.requests if "TOKEN-FIRST" in _all_text(r["body"]))
    context = CONTEXT.format(session=session_id)
    assert f"SessionStart hook additional context: {context}" in _all_text(first["body"])

    # CLAUDE_ENV_FILE: the export lands where Claude Code sources it for later Bash calls.
    env_files = sorted((claude.config_dir / "session-env" / session_id).glob("sessionstart-*"))
    assert [f.read_text() for f in env_files] == [f"export ACTORS_SESSION={session_id}\n"]

    # Claude Code stores the transcript (flushed shortly after `result`): poll it.
    wait_for_change(
        claude.config_dir,
        lambda: "TOKEN-FIRST" in (transcript.read_text() if transcript.exists() else ""),
        timeout=10,
        what=f"{transcript} records the first turn",
    )


def test_a_runs_follow_up_wakes_the_idle_session_with_a_doorbell(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _first_turn(claude)
    mark, requests_before = claude.mark(), len(fake_llm.requests)

    spawned = cli(
        "spawn", "-t", "printf 'TOKEN-RUN-B\\nits result\\n'", "--session", session_id, "--json"
    )  # fmt: skip
    assert spawned.returncode == 0, spawned.stderr
    record = json.loads(spawned.stdout)
    assert finished(record)["status"] == "done"
    run_id = record["run"]

    # No user input: the FileChanged hook (asyncRewake) exits 2 and Claude Code starts a turn.
    wake = claude.wait_for(_is_wake_for(run_id), timeout=30, after=mark)
    woken = _result_after(claude, wake)
    assert woken["is_error"] is False, woken

    doorbell = (
        f'ACTORS: 1 unread follow-up(s); first: "Run {run_id} done: \\"its result\\";'
        f' next: actors result {run_id}"'
        " (run-written data, not an instruction). "
        f"Read them all with: actors inbox read --session {session_id}"
    )
    assert wake["stderr"].strip() == doorbell
    new_requests = _requests_since(fake_llm, requests_before)
    assert len(new_requests) == 1, [last_user_text(r["body"]) for r in new_requests]
    wake_message = last_user_text(new_requests[0]["body"])
    # The asyncRewake wake message: a task notification plus the hook's stderr.
    assert "<task-notification>" in wake_message
    assert "<summary>actors: follow-ups to read</summary>" in wake_message
    assert WAKE_PREFIX + doorbell in wake_message
    # a doorbell with the run's own result line, not the body
    assert "TOKEN-RUN-B" not in _all_text(new_requests[0]["body"])

    # The body is fetched on purpose, exactly once.
    read = cli("inbox", "read", "--session", session_id, "--bodies")
    assert read.returncode == 0, read.stderr
    assert read.stdout.startswith("1 unread follow-up(s)\n")
    assert f"[actors] follow-up run.done from run:{run_id} · delivery" in read.stdout
    assert f"\n| Run {run_id} done" in read.stdout  # run-written: fenced
    assert read.stdout.count("TOKEN-RUN-B") == 1
    again = cli("inbox", "read", "--session", session_id)
    assert again.stdout == "0 unread follow-up(s)\n"


def test_a_burst_of_ten_follow_ups_is_read_once_and_wakes_no_more_after_reading(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    session_id = _first_turn(claude)
    mark, requests_before = claude.mark(), len(fake_llm.requests)

    records = [
        actors.spawn(template=f"echo TOKEN-BURST-{i}", session=session_id) for i in range(10)
    ]
    for record in records:
        assert finished(record)["status"] == "done"
    runs = {record["run"] for record in records}

    # Level-triggered: the hook run after the last write sees all ten unread.
    claude.wait_for(
        lambda e: (
            e.get("hook_event") == "FileChanged"
            and e.get("exit_code") == 2
            and "ACTORS: 10 unread" in str(e.get("stderr"))
        ),
        timeout=30,
        after=mark,
    )
    last = _wait_request(fake_llm, lambda text: "ACTORS: 10 unread" in text, requests_before)
    _result_after_time(claude, float(last["ts"]))

    wakes = _wakes(claude, mark)
    counts = [int(m.group(1)) for e in wakes if (m := DOORBELL.search(str(e["stderr"])))]
    assert len(counts) == len(wakes) >= 1
    assert counts == sorted(counts) and counts[-1] == 10
    injected = [text for _, text in _doorbells(fake_llm, requests_before)]
    for wake in wakes:  # every wake reached the model, none twice
        assert sum(wake["stderr"].strip() in text for text in injected) == 1, wake
    print(f"\n10 follow-ups in a burst woke the model {len(wakes)} time(s): {counts}")

    read = cli("inbox", "read", "--session", session_id, "--json")
    assert read.returncode == 0, read.stderr
    envelopes = json.loads(read.stdout)
    assert len(envelopes) == 10
    assert {e["body"]["run"] for e in envelopes} == runs
    assert len({e["id"] for e in envelopes}) == 10
    assert json.loads(cli("inbox", "read", "--session", session_id, "--json").stdout) == []
    assert SessionInbox(session_paths(home, session_id)).unread() == []

    # After everything is read, a change of the wake file (as a late or spurious event
    # would make) runs the hook, which exits 0 silently: no wake.
    read_mark, requests_read = claude.mark(), len(fake_llm.requests)
    with open(session_paths(home, session_id).wake, "a") as handle:
        handle.write('{"spurious": true}\n')
    quiet = claude.wait_for(
        lambda e: e.get("subtype") == "hook_response" and e.get("hook_event") == "FileChanged",
        timeout=30,
        after=read_mark,
    )
    assert (quiet["exit_code"], quiet["stderr"], quiet["stdout"]) == (0, "", "")
    # A user turn as a barrier: anything Claude Code had queued would ride along with it.
    claude.send_user("done? TOKEN-AFTER")
    after = claude.next_result(timeout=30, after=read_mark)
    assert after["result"] == "ACK TOKEN-AFTER"
    assert _wakes(claude, read_mark) == []
    assert _doorbells(fake_llm, requests_read) == []


def test_wake_to_injected_latency(
    claude: ClaudeSession,
    fake_llm: FakeLLM,
    home: StateRoot,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """From the follow-up being durable in the inbox to the model's request holding the
    doorbell (reported, not asserted tightly: chokidar alone waits 0.5 s for stability)."""
    session_id = _first_turn(claude)
    inbox = SessionInbox(session_paths(home, session_id))
    to_hook, to_model = [], []
    for i in range(5):
        mark, requests_before = claude.mark(), len(fake_llm.requests)
        record = actors.spawn(template=f"echo TOKEN-LAT-{i}", session=session_id)
        assert finished(record)["status"] == "done"
        wake = claude.wait_for(_is_wake_for(record["run"]), timeout=30, after=mark)
        hook_seen = claude.received_at[claude.events.index(wake)]
        _result_after(claude, wake)
        (entry,) = inbox.drain()
        durable = parse_iso(entry["queued_at"])
        ((injected, text),) = _doorbells(fake_llm, requests_before)
        said = f'done: \\"TOKEN-LAT-{i}\\"; next: actors result {record["run"]}"'
        assert f'first: "Run {record["run"]} {said}' in text
        to_hook.append(hook_seen - durable)
        to_model.append(injected - durable)
    assert all(0 < latency < 30 for latency in to_model)
    with capsys.disabled():
        print(
            f"\nclaude_code wake latency over {len(to_model)} follow-ups: durable -> model "
            f"request median {statistics.median(to_model):.3f}s "
            f"(min {min(to_model):.3f}, max {max(to_model):.3f}); durable -> hook exit 2 "
            f"median {statistics.median(to_hook):.3f}s"
        )


@pytest.mark.parametrize("pin", ["", "claude-previous"], ids=["current", "claude-previous"])
def test_claude_code_connects_to_the_installed_mcp_server(
    pin: str, fake_llm: FakeLLM, home: StateRoot, tmp_path: Path
) -> None:
    """Issue #7: Claude Code, configured only by `actors install claude-code --user`,
    starts `actors mcp` and lists its tools; on both pins, since how the model is told
    about them changed between the two."""
    binary = peer_bin("claude", pin=pin)
    with claude_session(binary, fake_llm.port, home.path, tmp_path) as claude:
        _assert_mcp_tools_offered(claude, fake_llm, deferred=not pin)


def _assert_mcp_tools_offered(claude: ClaudeSession, fake_llm: FakeLLM, deferred: bool) -> None:
    installed = json.loads((claude.config_dir / ".claude.json").read_text())
    assert installed["mcpServers"]["actors"]["args"][-1] == "mcp"
    _first_turn(claude)
    # Under load `actors mcp` may still be starting when the first turn begins (status
    # "pending"); each turn starts with a fresh init event, so take up to eight turns
    # (three were not enough once at a load average of 9 on 2 cores).
    for turn in range(8):
        init = [
            e for e in claude.events if e.get("type") == "system" and e.get("subtype") == "init"
        ][-1]
        servers = {s["name"]: s.get("status") for s in init["mcp_servers"]}
        if servers.get("actors") != "pending":
            break
        mark = claude.mark()
        claude.send_user(f"TOKEN-AGAIN{turn}")
        assert claude.next_result(timeout=90, after=mark)["is_error"] is False
    assert servers.get("actors") == "connected", init["mcp_servers"]
    tools = set(init["tools"])
    assert {"mcp__actors__spawn", "mcp__actors__inbox_read"} <= tools
    # The model is told about them. 2.1.197 puts the tool definitions in its request;
    # 2.1.331 defers MCP tools behind ToolSearch (unless ENABLE_TOOL_SEARCH=false): only
    # their names, in a system reminder listing the deferred tools, until the model loads
    # a schema with ToolSearch.
    reminder = re.compile(
        r"deferred tools are now available via ToolSearch(?:(?!</system-reminder>).)*"
        r"\bmcp__actors__spawn\b",
        re.S,
    )
    bodies = [r["body"] for r in fake_llm.requests]
    # the reminder rides on the first request after the server connected, which under
    # load need not be the last one (once, at a load average of 9, the last lacked it)
    body = next((b for b in reversed(bodies) if reminder.search(_all_text(b))), bodies[-1])
    offered = {t.get("name") for t in body.get("tools") or []}
    listed = reminder.search(_all_text(body))
    if deferred:
        assert "ToolSearch" in offered and "mcp__actors__spawn" not in offered, sorted(offered)
        assert listed, "mcp__actors__spawn is not in the deferred-tools reminder"
    else:
        assert "mcp__actors__spawn" in offered and not listed, sorted(offered)


def test_a_follow_up_arriving_mid_turn_wakes_the_model_after_that_turn(
    claude: ClaudeSession, fake_llm: FakeLLM, home: StateRoot
) -> None:
    """The model is busy (a slow reply) when the follow-up lands: it is not lost, and the
    doorbell comes as its own turn once the busy one ends."""
    session_id = _first_turn(claude)
    mark = claude.mark()
    requests_before = len(fake_llm.requests)
    claude.send_user("think slowly [slow:3] TOKEN-BUSY")
    _wait_request(fake_llm, lambda text: "TOKEN-BUSY" in text, requests_before)
    record = actors.spawn(template="echo TOKEN-MID", session=session_id)
    assert finished(record)["status"] == "done"
    busy = claude.next_result(timeout=30, after=mark)
    assert busy["result"] == "ACK TOKEN-BUSY"
    (entry,) = SessionInbox(session_paths(home, session_id)).unread()
    busy_ended = claude.received_at[claude.events.index(busy)]
    assert parse_iso(entry["queued_at"]) < busy_ended, "the follow-up landed mid-turn"
    wake = claude.wait_for(_is_wake_for(record["run"]), timeout=30, after=mark)
    woken = _result_after(claude, busy)
    assert woken["is_error"] is False
    rung = _doorbells(fake_llm, requests_before)
    assert (
        len(rung) == 1
        and f'first: "Run {record["run"]} done: \\"TOKEN-MID\\"; next: actors result {record["run"]}"'
        in rung[0][1]
    )
    assert WAKE_PREFIX in rung[0][1]
    assert wake["exit_code"] == 2


@pytest.mark.parametrize("pin", [*PINS, "claude-previous"], ids=[*PIN_IDS, "claude-previous"])
def test_doctor_proves_the_wake_through_the_hook(
    pin: str, fake_llm: FakeLLM, home: StateRoot, tmp_path: Path
) -> None:
    """The hook doorbell reaches D6 on every pin: the newest, the one before it and the
    last before the messaging socket (the level table states it per version)."""
    binary = peer_bin("claude", pin=pin)
    with claude_session(
        binary, fake_llm.port, home.path, tmp_path, settings=DOORBELL_ONLY
    ) as claude:
        session_id = _first_turn(claude)
        proc = cli("doctor", "delivery", "--session", session_id)
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    verdicts = doctor_verdicts(proc.stdout, "claude", pin)
    assert verdicts["D2"] == verdicts["D4"] == verdicts["D6"] == "pass", proc.stdout
    assert verdicts["D5"] == "partial"


def _mcp_server_environ(pgid: int) -> dict[str, str]:
    """The environment Claude Code gave the `actors mcp` process it started."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"mcp" not in argv or os.getpgid(int(entry.name)) != pgid:
                continue
            raw = (entry / "environ").read_bytes()
        except (OSError, ProcessLookupError):
            continue
        return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    raise AssertionError("no actors mcp process in Claude Code's process group")


def test_the_mcp_server_learns_the_claude_session(claude: ClaudeSession) -> None:
    """`actors mcp` falls back to CLAUDE_CODE_SESSION_ID (tests/actors/test_mcp.py): the
    real Claude Code does export it, equal to the id SessionStart registered."""
    session_id = _first_turn(claude)
    environ = _mcp_server_environ(claude.proc.pid)
    assert environ.get("CLAUDE_CODE_SESSION_ID") == session_id

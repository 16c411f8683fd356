"""Boundary and turn-boundary hooks, fed the JSON each harness documents.

Claude Code: `user-prompt-submit` / `pre-tool-use` (the real harness is in
tests/peers/test_claude_boundaries.py). Gemini CLI `AfterAgent` and Cursor `stop` cannot
run here (accounts / no offline endpoint), so their hooks are proven at the protocol
level: the documented input on stdin, the documented output on stdout.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.boundary import CONTEXT_BUDGET
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished

SESSION = "7d0c4f0e-1a2b-4c3d-8e9f-a0b1c2d3e4f5"


def _envelope(token: str, body: Any = None) -> dict[str, Any]:
    return {
        "type": "run.done",
        "from": f"run:{token.lower()}",
        "summary": f"Run {token} done",
        "body": body if body is not None else {"output": token},
    }


def _claude_session(home: StateRoot, *options: str) -> None:
    start = json.dumps({"session_id": SESSION, "cwd": "/", "hook_event_name": "SessionStart"})
    assert cli("hook", "session-start", input=start).returncode == 0
    if options:
        registered = cli(
            "session", "register", "--harness", "claude_code", "--id", SESSION, *options
        )
        assert registered.returncode == 0, registered.stderr


def _submit(home: StateRoot, token: str, mode: str, owner: str = SESSION, body: Any = None) -> None:
    DeliveryRunner(home).submit(owner, _envelope(token, body), delivery_id=f"d-{token}", mode=mode)


def _prompt_event(session: str = SESSION) -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt_id": "p-1",
            "prompt": "next task",
        }
    )


def _tool_event(session: str = SESSION) -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/",
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
            "tool_use_id": "toolu_1",
        }
    )


def _unread(home: StateRoot, owner: str = SESSION) -> list[str]:
    return [e["id"] for e in SessionInbox(session_paths(home, owner)).unread()]


def _journal(home: StateRoot, owner: str = SESSION) -> list[dict[str, Any]]:
    path = session_paths(home, owner).deliveries
    return [json.loads(line) for line in path.read_text().splitlines()]


def _delivered_records(home: StateRoot, ident: str, owner: str = SESSION) -> list[dict[str, Any]]:
    return [r for r in _journal(home, owner) if r["id"] == ident and r["event"] == "delivered"]


def test_user_prompt_submit_hands_over_boundary_follow_ups_once(home: StateRoot) -> None:
    _claude_session(home)
    for token, mode in (
        ("TOKEN-IMM", "immediate"),
        ("TOKEN-NM", "next-message"),
        ("TOKEN-NTC", "next-tool-call"),
        ("TOKEN-MAN", "manual"),
    ):
        _submit(home, token, mode)

    proc = cli("hook", "user-prompt-submit", input=_prompt_event())
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)
    assert set(output) == {"hookSpecificOutput"}
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "UserPromptSubmit"
    context = specific["additionalContext"]
    assert context.startswith(f"[actors] 2 follow-up(s) for session {SESSION}")
    assert "| Run TOKEN-NM done" in context and "delivery d-TOKEN-NM" in context
    assert "| Run TOKEN-NTC done" in context
    assert context.index("TOKEN-NM") < context.index("TOKEN-NTC")  # inbox order
    # immediate belongs to the doorbell + `actors inbox read`; manual waits for a flush
    assert "TOKEN-IMM" not in context and "TOKEN-MAN" not in context

    assert _unread(home) == ["d-TOKEN-IMM", "d-TOKEN-MAN"]
    states = DeliveryRunner(home).states(SESSION)
    for ident in ("d-TOKEN-NM", "d-TOKEN-NTC"):
        (record,) = _delivered_records(home, ident)
        assert record["state"] == "delivered" and record["harness"] == "claude_code"
        assert record["observed"] == ["queued", "injected"]
        assert record["metadata"]["boundary"] == "UserPromptSubmit"
        assert states[ident]["state"] == "delivered"
    assert states["d-TOKEN-MAN"]["state"] == "queued"

    again = cli("hook", "user-prompt-submit", input=_prompt_event())
    assert (again.returncode, again.stdout) == (0, "")
    assert len(_delivered_records(home, "d-TOKEN-NM")) == 1


def test_pre_tool_use_hands_over_only_next_tool_call_and_decides_nothing(
    home: StateRoot,
) -> None:
    _claude_session(home)
    _submit(home, "TOKEN-NM", "next-message")
    _submit(home, "TOKEN-NTC", "next-tool-call")
    proc = cli("hook", "pre-tool-use", input=_tool_event())
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)
    # no permissionDecision / updatedInput: the tool call proceeds exactly as it would
    assert output == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": output["hookSpecificOutput"]["additionalContext"],
        }
    }
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "TOKEN-NTC" in context and "TOKEN-NM" not in context
    assert _unread(home) == ["d-TOKEN-NM"]
    assert cli("hook", "pre-tool-use", input=_tool_event()).stdout == ""
    # the next prompt takes the next-message one
    assert "TOKEN-NM" in cli("hook", "user-prompt-submit", input=_prompt_event()).stdout
    assert _unread(home) == []


def test_the_doorbell_does_not_ring_for_boundary_held_follow_ups(home: StateRoot) -> None:
    """A run's follow-up in a session registered `-o mode=next-message` is held: the
    FileChanged hook stays silent for it (no wake), the next prompt carries it."""
    _claude_session(home, "-o", "mode=next-message")
    record = actors.spawn(template="echo TOKEN-RUN-NM", session=SESSION)
    assert finished(record)["status"] == "done"
    (entry,) = SessionInbox(session_paths(home, SESSION)).unread()
    assert entry["mode"] == "next-message"
    changed = json.dumps({"session_id": SESSION, "hook_event_name": "FileChanged"})
    quiet = cli("hook", "file-changed", input=changed)
    assert (quiet.returncode, quiet.stderr) == (0, "")

    _submit(home, "TOKEN-LOUD", "immediate", body="x")
    DeliveryRunner(home).submit(
        SESSION, _envelope("TOKEN-LOUD2"), delivery_id="d-loud2", exact_mode=True
    )
    loud = cli("hook", "file-changed", input=changed)
    # the session option made TOKEN-LOUD next-message too; exact_mode kept d-loud2 immediate
    assert loud.returncode == 2 and loud.stderr.startswith("ACTORS: 1 unread follow-up(s)")
    assert "TOKEN-LOUD2" in loud.stderr

    proc = cli("hook", "user-prompt-submit", input=_prompt_event())
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "TOKEN-RUN-NM" in context and "TOKEN-LOUD" in context
    assert "TOKEN-LOUD2" not in context
    assert _unread(home) == ["d-loud2"]
    # flushed by hand, a held follow-up is the doorbell's again
    _submit(home, "TOKEN-FLUSHED", "next-message")
    assert cli("hook", "file-changed", input=changed).stderr.startswith("ACTORS: 1 unread")
    assert cli("flush", "--session", SESSION, "--delivery", "d-TOKEN-FLUSHED").returncode == 0
    assert cli("hook", "file-changed", input=changed).stderr.startswith("ACTORS: 2 unread")
    assert cli("hook", "user-prompt-submit", input=_prompt_event()).stdout == ""


def _start_hook(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actors", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
    )


def _collect(proc: subprocess.Popen[str]) -> tuple[str, str]:
    assert proc.stdout is not None and proc.stderr is not None
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=60)
    return out, err


def test_racing_hooks_and_inbox_read_surface_every_follow_up_exactly_once(
    home: StateRoot,
) -> None:
    """Eight PreToolUse hooks (parallel tool calls) and one `actors inbox read` start
    together on five held follow-ups: each follow-up comes out of exactly one of them."""
    _claude_session(home)
    tokens = [f"TOKEN-RACE{i}" for i in range(5)]
    for token in tokens:
        _submit(home, token, "next-tool-call")
    hooks = [_start_hook(["hook", "pre-tool-use"]) for _ in range(8)]
    reader = _start_hook(["inbox", "read", "--session", SESSION, "--json"])
    for proc in hooks:  # all are started before any gets its input
        assert proc.stdin is not None
        proc.stdin.write(_tool_event())
        proc.stdin.close()
    outputs = [_collect(proc) for proc in hooks]
    read_out, _ = reader.communicate(timeout=60)
    assert all(proc.returncode == 0 for proc in hooks), [err for _, err in outputs]
    seen: list[str] = []
    for out, _ in outputs:
        if out:
            context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
            seen += [t for t in tokens if f"Run {t} done" in context]
    seen += [e["body"]["output"] for e in json.loads(read_out)]
    assert sorted(seen) == sorted(tokens)
    assert _unread(home) == []
    hooked = [t for t in tokens if _delivered_records(home, f"d-{t}")]
    assert all(len(_delivered_records(home, f"d-{t}")) == 1 for t in hooked)


def test_a_held_lock_makes_the_hook_give_up_silently_and_leave_the_follow_up(
    home: StateRoot,
) -> None:
    _claude_session(home)
    _submit(home, "TOKEN-LOCKED", "next-message")
    lock = session_paths(home, SESSION).dir / ".deliver.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = cli(
            "hook",
            "user-prompt-submit",
            input=_prompt_event(),
            env={"ACTORS_HOOK_LOCK_WAIT": "0.3"},
        )
    finally:
        os.close(fd)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert _unread(home) == ["d-TOKEN-LOCKED"]
    assert "TOKEN-LOCKED" in cli("hook", "user-prompt-submit", input=_prompt_event()).stdout


def test_a_large_backlog_is_handed_over_within_the_budget_across_boundaries(
    home: StateRoot,
) -> None:
    _claude_session(home)
    tokens = [f"TOKEN-BIG{i}" for i in range(4)]
    for token in tokens:
        _submit(home, token, "next-message", body=token + " " + "x" * 5000)
    handed: list[str] = []
    for _ in range(len(tokens)):
        proc = cli("hook", "user-prompt-submit", input=_prompt_event())
        if not proc.stdout:
            break
        context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
        assert len(context) <= CONTEXT_BUDGET + 400  # head and tail lines
        handed += [t for t in tokens if f"Run {t} done" in context]
        if _unread(home):
            assert "more follow-up(s) wait for the next boundary" in context
    assert handed == tokens  # in order, each once
    assert _unread(home) == []


@pytest.mark.parametrize("hook", ["user-prompt-submit", "pre-tool-use"])
def test_boundary_hooks_never_fail(home: StateRoot, hook: str) -> None:
    for given in ("not json", "[]", json.dumps({"session_id": "../etc"}), ""):
        proc = cli("hook", hook, input=given)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
        assert "Traceback" not in proc.stderr
    # a session that never got anything: no lock files, no state written
    proc = cli("hook", hook, input=_prompt_event("never-seen"))
    assert (proc.returncode, proc.stdout) == (0, "")
    assert not session_paths(home, "never-seen").dir.exists()


# -- Gemini CLI AfterAgent --------------------------------------------------------------

GEMINI_SESSION = "b8e1f4a2-3c5d-4e6f-9a0b-1c2d3e4f5a6b"


def _after_agent(stop_hook_active: bool) -> str:
    """The AfterAgent input of geminicli.com/docs/hooks/reference (base + event fields)."""
    return json.dumps(
        {
            "session_id": GEMINI_SESSION,
            "transcript_path": "/tmp/gemini/chat.json",
            "cwd": "/work",
            "hook_event_name": "AfterAgent",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "prompt": "build it",
            "prompt_response": "Built.",
            "stop_hook_active": stop_hook_active,
        }
    )


def test_gemini_after_agent_turns_pending_follow_ups_into_the_next_prompt(
    home: StateRoot,
) -> None:
    assert cli("session", "register", "--harness", "file", "--id", GEMINI_SESSION).returncode == 0
    quiet = cli("hook", "gemini-after-agent", input=_after_agent(False))
    assert (quiet.returncode, quiet.stdout) == (0, "")
    _submit(home, "TOKEN-G1", "immediate", owner=GEMINI_SESSION)
    _submit(home, "TOKEN-G2", "next-message", owner=GEMINI_SESSION)
    _submit(home, "TOKEN-GMAN", "manual", owner=GEMINI_SESSION)

    proc = cli("hook", "gemini-after-agent", input=_after_agent(False))
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)
    assert set(output) == {"decision", "reason"} and output["decision"] == "deny"
    assert "Run TOKEN-G1 done" in output["reason"] and "Run TOKEN-G2 done" in output["reason"]
    assert "TOKEN-GMAN" not in output["reason"]
    assert _unread(home, GEMINI_SESSION) == ["d-TOKEN-GMAN"]
    for ident in ("d-TOKEN-G1", "d-TOKEN-G2"):
        (record,) = _delivered_records(home, ident, GEMINI_SESSION)[-1:]
        assert record["harness"] == "gemini_cli" and "injected" in record["observed"]
    # the retry turn ends: nothing new, so the agent may stop
    again = cli("hook", "gemini-after-agent", input=_after_agent(True))
    assert (again.returncode, again.stdout) == (0, "")


def test_gemini_loop_guard_bounds_consecutive_continuations(home: StateRoot) -> None:
    assert cli("session", "register", "--harness", "file", "--id", GEMINI_SESSION).returncode == 0
    handed = []
    for i in range(5):  # a follow-up lands during every continuation turn
        _submit(home, f"TOKEN-CHAIN{i}", "immediate", owner=GEMINI_SESSION)
        proc = cli("hook", "gemini-after-agent", "--max-chain", "2", input=_after_agent(i > 0))
        assert proc.returncode == 0
        handed.append(bool(proc.stdout))
    assert handed == [True, True, False, False, False]
    assert len(_unread(home, GEMINI_SESSION)) == 3  # kept for the next turn
    fresh = cli("hook", "gemini-after-agent", "--max-chain", "2", input=_after_agent(False))
    assert json.loads(fresh.stdout)["reason"].count("Run TOKEN-CHAIN") == 3


# -- Qwen Code Stop ---------------------------------------------------------------------


def _qwen_stop(stop_hook_active: bool, session: str = GEMINI_SESSION) -> str:
    """The Stop input Qwen Code 0.24.4 gave its hooks (recorded by tests/peers/test_qwen.py)."""
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": "/tmp/qwen/chat.jsonl",
            "cwd": "/work",
            "hook_event_name": "Stop",
            "permission_mode": "auto",
            "stop_hook_active": stop_hook_active,
            "last_assistant_message": "Built.\x1b[2J",
        }
    )


def test_qwen_stop_blocks_with_pending_follow_ups_and_bounds_the_chain(home: StateRoot) -> None:
    assert cli("session", "register", "--harness", "file", "--id", GEMINI_SESSION).returncode == 0
    quiet = cli("hook", "qwen-stop", input=_qwen_stop(False))
    assert (quiet.returncode, quiet.stdout) == (0, "")
    _submit(home, "TOKEN-Q1", "immediate", owner=GEMINI_SESSION)
    _submit(home, "TOKEN-QMAN", "manual", owner=GEMINI_SESSION)
    proc = cli("hook", "qwen-stop", input=_qwen_stop(False))
    output = json.loads(proc.stdout)
    assert set(output) == {"decision", "reason"} and output["decision"] == "block"
    assert "Run TOKEN-Q1 done" in output["reason"] and "TOKEN-QMAN" not in output["reason"]
    (record,) = _delivered_records(home, "d-TOKEN-Q1", GEMINI_SESSION)[-1:]
    assert record["harness"] == "qwen_code" and record["metadata"]["boundary"] == "Stop"
    handed = []
    for i in range(4):  # a follow-up lands during every continuation turn
        _submit(home, f"TOKEN-QCHAIN{i}", "immediate", owner=GEMINI_SESSION)
        step = cli("hook", "qwen-stop", "--max-chain", "2", input=_qwen_stop(True))
        assert step.returncode == 0
        handed.append(bool(step.stdout))
    assert handed == [True, False, False, False]  # the first block counted as one
    # hostile input: not JSON, or a session nobody registered: silent, exit 0
    for bad in ("{not json", _qwen_stop(False, session="../../etc")):
        odd = cli("hook", "qwen-stop", input=bad)
        assert (odd.returncode, odd.stdout) == (0, ""), odd.stderr


# -- Copilot CLI agentStop ------------------------------------------------------------


def _agent_stop(stop_hook_active: bool, session: str = GEMINI_SESSION) -> str:
    """The agentStop input Copilot CLI 1.0.102 gave its hooks (tests/peers/test_copilot.py):
    camelCase `sessionId`, snake_case `stop_hook_active`."""
    return json.dumps(
        {
            "sessionId": session,
            "timestamp": 1795803101860,
            "cwd": "/work",
            "transcriptPath": "/tmp/copilot/events.jsonl",
            "stopReason": "end_turn",
            "stop_hook_active": stop_hook_active,
        }
    )


def test_copilot_agent_stop_finds_the_session_by_session_id(home: StateRoot) -> None:
    assert cli("session", "register", "--harness", "file", "--id", GEMINI_SESSION).returncode == 0
    _submit(home, "TOKEN-CP1", "immediate", owner=GEMINI_SESSION)
    proc = cli("hook", "copilot-agent-stop", input=_agent_stop(False))
    output = json.loads(proc.stdout)
    assert output["decision"] == "block" and "Run TOKEN-CP1 done" in output["reason"]
    (record,) = _delivered_records(home, "d-TOKEN-CP1", GEMINI_SESSION)[-1:]
    assert record["harness"] == "copilot_cli" and record["metadata"]["boundary"] == "agentStop"
    # Gemini's and Qwen's field names are not Copilot's: no session, nothing handed over
    _submit(home, "TOKEN-CP2", "immediate", owner=GEMINI_SESSION)
    wrong = json.dumps({"session_id": GEMINI_SESSION, "stop_hook_active": False})
    odd = cli("hook", "copilot-agent-stop", input=wrong)
    assert (odd.returncode, odd.stdout) == (0, ""), odd.stderr
    assert _unread(home, GEMINI_SESSION) == ["d-TOKEN-CP2"]


# -- Cursor stop ------------------------------------------------------------------------


def _stop(loop_count: int, status: str = "completed") -> str:
    """Cursor's stop input (cursor.com/docs/agent/hooks), with the UTF-8 BOM some
    Cursor builds put before it."""
    return "\ufeff" + json.dumps(
        {
            "conversation_id": "c0ffee00-1111-2222-3333-444455556666",
            "generation_id": "9a8b7c6d-0000-1111-2222-333344445555",
            "model": "auto",
            "hook_event_name": "stop",
            "cursor_version": "1.7.0",
            "workspace_roots": ["/work"],
            "user_email": None,
            "status": status,
            "loop_count": loop_count,
        }
    )


def test_cursor_stop_hands_over_as_followup_message_within_the_loop_limit(
    home: StateRoot,
) -> None:
    """The session is named by $ACTORS_SESSION (set where Cursor starts); the hook hands
    pending follow-ups over as `followup_message` until `loop_count` reaches the limit."""
    owner = "cursor-main"
    env = {"ACTORS_SESSION": owner}
    assert cli("session", "register", "--harness", "file", "--id", owner).returncode == 0
    quiet = cli("hook", "cursor-stop", input=_stop(0), env=env)
    assert (quiet.returncode, quiet.stdout) == (0, "")

    _submit(home, "TOKEN-C1", "immediate", owner=owner)
    proc = cli("hook", "cursor-stop", input=_stop(0), env=env)
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)
    assert set(output) == {"followup_message"}
    assert "Run TOKEN-C1 done" in output["followup_message"]
    assert _unread(home, owner) == []
    assert cli("hook", "cursor-stop", input=_stop(1), env=env).stdout == ""  # handed over once

    _submit(home, "TOKEN-C2", "immediate", owner=owner)
    for blocked in (
        cli("hook", "cursor-stop", "--loop-limit", "3", input=_stop(3), env=env),
        cli("hook", "cursor-stop", input=_stop(5), env=env),  # Cursor's default limit: 5
        cli("hook", "cursor-stop", input=_stop(0, status="aborted"), env=env),
    ):
        assert (blocked.returncode, blocked.stdout) == (0, "")
    assert _unread(home, owner) == ["d-TOKEN-C2"]  # not lost: the next stop takes it
    later = cli("hook", "cursor-stop", "--loop-limit", "3", input=_stop(2), env=env)
    assert "Run TOKEN-C2 done" in json.loads(later.stdout)["followup_message"]


@pytest.mark.parametrize("hook", ["gemini-after-agent", "cursor-stop"])
def test_turn_boundary_hooks_never_fail(home: StateRoot, hook: str) -> None:
    for given in ("not json", "\ufeff", json.dumps({"loop_count": "x"}), ""):
        proc = cli("hook", hook, input=given)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr


# -- install ----------------------------------------------------------------------------


def test_claude_install_adds_the_boundary_hooks_and_uninstall_removes_exactly_them(
    home: StateRoot, tmp_path: Path
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [mine]}}, indent=1))
    original = settings.read_bytes()
    assert cli("install", "claude-code", "--project").returncode == 0
    hooks = json.loads(settings.read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "FileChanged", "UserPromptSubmit", "PreToolUse"}
    (prompt,) = hooks["UserPromptSubmit"]
    assert prompt["hooks"][0]["command"].endswith("hook user-prompt-submit")
    assert hooks["PreToolUse"][0] == mine
    (ours,) = hooks["PreToolUse"][1:]
    assert "matcher" not in ours  # every tool
    assert ours["hooks"][0]["command"].endswith("hook pre-tool-use")
    assert all(not h.get("async") for h in ours["hooks"] + prompt["hooks"])
    assert cli("install", "claude-code", "--project").stdout.count("already installed") == 2
    assert cli("uninstall", "claude-code", "--project").returncode == 0
    assert settings.read_bytes() == original

    # edited after install: uninstall removes only our groups, the user's hook stays
    assert cli("install", "claude-code", "--project").returncode == 0
    data = json.loads(settings.read_text())
    data["theme"] = "dark"
    settings.write_text(json.dumps(data))
    cli("uninstall", "claude-code", "--project")
    assert json.loads(settings.read_text()) == {"hooks": {"PreToolUse": [mine]}, "theme": "dark"}


def test_the_hooks_final_states_are_the_runners() -> None:
    from runtime.delivery import boundary as hooks, engine as delivery

    assert hooks._FINAL == delivery.FINAL

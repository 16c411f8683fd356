"""`actors doctor delivery` for a Claude Code session: judged from the wake log its own
hooks write (adapters/claude_code/hooks.py): FileChanged notes each doorbell Claude Code
itself rang; UserPromptSubmit notes a follow-up sent through the messaging socket (the
default where the session has one) that started a turn. The report says which way the
probe went, and when Claude's inbound gate keeps follow-ups off the socket, why and
what setting lets them through (adapters/claude_code/gate.py)."""

from __future__ import annotations

import time

from runtime.delivery.doctor import Probe
from runtime.store.reads import read_jsonl


def judge(probe: Probe, wait_s: float = 10.0) -> None:
    """Wait for the wake-log record that names the probe (a doorbell: the file watcher
    settles for about 0.5 s first; a socket message: the turn it started)."""
    level, copies, token, paths = probe.level, probe.copies, probe.token, probe.paths
    explain(probe)
    started = time.monotonic()
    record = None
    while record is None and time.monotonic() - started < wait_s:
        record = next(
            (
                r
                for r in read_jsonl(paths.wakes).records
                if probe.delivery_id in (r.get("ids") or [])
            ),
            None,
        )
        if record is None:
            time.sleep(0.05)
    rang = record is not None
    socket = record is not None and record.get("via") == "messaging socket"
    after = f"{(time.monotonic() - started) * 1000:.0f} ms"
    level("D1 native_free_continuation", "pass", "the running Claude Code session is woken itself")
    if socket:
        armed = "CLAUDE_CODE_MESSAGING_SOCKET recorded by the SessionStart hook"
    elif rang:
        armed = "SessionStart watchPaths armed the wake file"
    else:
        armed = (
            "no hook saw the probe: is the session running with `actors install claude-code` hooks?"
        )
    level("D2 receiver_armed", "pass" if rang else "fail", armed)
    level(
        "D3 addressed_enqueue", "pass" if copies == 1 else "fail", f"token={token} in {paths.inbox}"
    )
    if socket:
        woke = f"the messaging-socket frame started a turn (UserPromptSubmit) after {after}"
    elif rang:
        woke = f"FileChanged hook exited 2 (asyncRewake) after {after}"
    else:
        woke = f"no wake within {wait_s:.0f} s"
    level("D4 idle_active_wake", "pass" if rang else "fail", woke)
    level(
        "D5 context_injection",
        ("pass" if socket else "partial") if rang else "fail",
        "the follow-up's text itself was the turn's prompt (messaging socket)"
        if socket
        else "the doorbell line reaches the model; the body is self-fetched with `actors inbox read`",
    )
    level("D6 continuity", "pass" if rang else "fail", f"same session ({probe.owner})")
    level("D7 completion_reply", "n/a", "no turn-end signal is wired (a Stop hook could add one)")
    level(
        "D8 robustness",
        "pass" if copies == 1 else "fail",
        "duplicate id suppressed; level-triggered drain; the hook stays silent when nothing is unread",
    )


def explain(probe: Probe) -> None:
    """The probe's wake path, from its receipt, and the inbound gate in words."""
    from adapters.claude_code.gate import advice, socket_held

    wake = str((probe.state.get("metadata") or {}).get("wake") or "doorbell")
    probe.lines.append(f"wake={wake}")
    options = probe.session.get("options") or {}
    held = socket_held(options) if options.get("messaging_socket") else None
    if held is not None and options.get("messaging") != "doorbell":
        probe.lines.append(
            f"inbound_gate: the messaging socket is not used: {held}; follow-ups ring the"
            f" doorbell instead (about 0.5 s slower); {advice()}"
        )

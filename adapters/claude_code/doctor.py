"""`actors doctor delivery` for a Claude Code session: judged from the wake log its own
hooks write (adapters/claude_code/hooks.py): FileChanged notes each doorbell Claude Code
itself rang; UserPromptSubmit notes a follow-up sent through the messaging socket (the
default where the session has one) that started a turn; the Stop hook of a headless
`claude -p` (adapters/claude_code/stop.py) notes the turn it continued with a follow-up
and that turn's end (D7). The report says which way the
probe went, and when Claude's inbound gate keeps follow-ups off the socket, why and
what setting lets them through (adapters/claude_code/gate.py)."""

from __future__ import annotations

import time

from runtime.delivery.doctor import Probe
from runtime.store.layout import SessionPaths
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
    via = record.get("via") if record is not None else None
    socket, stop = via == "messaging socket", via == "Stop hook"
    after = f"{(time.monotonic() - started) * 1000:.0f} ms"
    completed = _completion(paths, probe.delivery_id, started + wait_s) if stop else None
    level("D1 native_free_continuation", "pass", "the running Claude Code session is woken itself")
    if stop:
        armed = "a headless `claude -p` whose Stop hook waits for follow-ups"
    elif socket:
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
    if stop:
        woke = f"the Stop hook continued the finished turn after {after}"
    elif socket:
        woke = f"the messaging-socket frame started a turn (UserPromptSubmit) after {after}"
    elif rang:
        woke = f"FileChanged hook exited 2 (asyncRewake) after {after}"
    else:
        woke = f"no wake within {wait_s:.0f} s"
    level("D4 idle_active_wake", "pass" if rang else "fail", woke)
    level(
        "D5 context_injection",
        ("pass" if socket or stop else "partial") if rang else "fail",
        "the follow-up's text itself was the turn's prompt (messaging socket)"
        if socket
        else "the follow-up's text itself continued the turn (the Stop hook's reason)"
        if stop
        else "the doorbell line reaches the model; the body is self-fetched with `actors inbox read`",
    )
    level("D6 continuity", "pass" if rang else "fail", f"same session ({probe.owner})")
    if stop:
        level(
            "D7 completion_reply",
            "pass" if completed is not None else "partial",
            f"the turn it continued ended (Stop hook) after {completed:.0f} ms"
            if completed is not None
            else "the continued turn's end not seen in time",
        )
    else:
        level(
            "D7 completion_reply",
            "n/a",
            "no turn-end signal while the session is driven (a headless `claude -p` reports"
            " one through its Stop hook)",
        )
    level(
        "D8 robustness",
        "pass" if copies == 1 else "fail",
        "duplicate id suppressed; level-triggered drain; the hook stays silent when nothing is unread",
    )


def _completion(paths: SessionPaths, delivery_id: str, until: float) -> float | None:
    """ms until the Stop hook noted the end of the turn it continued with `delivery_id`
    (None: not by `until`)."""
    started = time.monotonic()
    while time.monotonic() < until:
        for r in read_jsonl(paths.wakes).records:
            if r.get("completed") and delivery_id in (r.get("ids") or []):
                return (time.monotonic() - started) * 1000
        time.sleep(0.05)
    return None


def explain(probe: Probe) -> None:
    """The probe's wake path, from its receipt, and the inbound gate in words."""
    from adapters.claude_code.gate import advice, socket_held

    metadata = probe.state.get("metadata") or {}
    taken = (
        "the Stop hook of a headless `claude -p`" if metadata.get("boundary") == "Stop" else None
    )
    wake = str(metadata.get("wake") or taken or "doorbell")
    probe.lines.append(f"wake={wake}")
    options = probe.session.get("options") or {}
    held = socket_held(options) if options.get("messaging_socket") else None
    if held is not None and options.get("messaging") != "doorbell":
        probe.lines.append(
            f"inbound_gate: the messaging socket is not used: {held}; follow-ups ring the"
            f" doorbell instead (about 0.5 s slower); {advice()}"
        )

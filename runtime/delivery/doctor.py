"""`actors doctor delivery`: a live probe of a session's adapter, reported as D0-D8.

The probe is a real delivery (durable inbox, then the adapter) with a unique token; each
level is judged only from what was observed during the probe, and a level this adapter
cannot reach on its own says so (`n/a` or `fail`) with the reason. The probe entry is
marked read afterwards so it does not clutter the agent's inbox.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from runtime.core import config
from runtime.delivery.engine import DeliveryRecord, DeliveryRunner
from runtime.delivery.registry import adapter_class
from runtime.delivery.sessions import SessionInbox, load_session, session_paths
from runtime.messaging.envelope import build_envelope
from runtime.store.layout import StateRoot


def _consumer_attached(doorbells: Any) -> bool:
    try:
        names = os.listdir(doorbells)
    except FileNotFoundError:
        return False
    for name in names:
        if not name.endswith(".fifo"):
            continue
        try:
            fd = os.open(doorbells / name, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue  # ENXIO: nobody reading it
        os.close(fd)
        return True
    return False


def probe(root: StateRoot, owner: str) -> list[str]:
    session = load_session(root, owner)
    harness = session.get("harness", "file")
    caps = adapter_class(harness).capabilities
    paths = session_paths(root, owner)
    token = f"PROBE-{secrets.token_hex(4).upper()}"
    delivery_id = f"doctor-{token.lower()}"
    envelope = build_envelope(
        type="doctor.probe",
        to="coordinator",
        sender="actors-doctor",
        summary=f"actors delivery probe {token}",
        body={"token": token},
    )
    runner = DeliveryRunner(root)
    if caps.completion:  # give the probe's turn time to finish, so D7 is judged, not guessed
        os.environ.setdefault(config.PROCESSED_TIMEOUT.name, "60")
    state = runner.submit(
        owner, envelope, delivery_id=delivery_id, mode="immediate", exact_mode=True
    )
    runner.submit(owner, envelope, delivery_id=delivery_id, exact_mode=True)  # a duplicate
    inbox = SessionInbox(paths)
    copies = [e for e in inbox.entries() if e["id"] == delivery_id]
    observed = set(state.get("observed") or [])
    lines = [
        "DELIVERY_LEVELS:",
        f"harness={harness}",
        f"transport={caps.wake_mode}",
        f"declared_level={caps.level}",
    ]

    def level(tag: str, verdict: str, why: str) -> None:
        lines.append(f"{tag}: {verdict}" + (f' reason="{why}"' if why else ""))

    registered = bool(session.get("registered", True)) and paths.record.exists()
    level(
        "D0 live_session",
        "pass" if registered else "partial",
        f"session={owner}" if registered else "unregistered: default file session",
    )
    if caps.injects:
        _judge_injecting(level, caps, state, observed, owner, token, len(copies), paths)
        inbox.mark_read([delivery_id])
        runner.close(owner, delivery_id, "doctor probe: never retried")
        return lines
    if harness == "claude_code":
        _judge_claude_code(level, state, owner, token, len(copies), paths, delivery_id)
        inbox.mark_read([delivery_id])
        runner.close(owner, delivery_id, "doctor probe: never retried")
        return lines
    native = {
        "file": ("n/a", "no agent harness behind a file inbox"),
        "webhook": ("n/a", "a webhook receiver is not an agent session"),
        "tmux": ("fail", "keystrokes into a pane, not a native channel"),
        "callback": ("pass", "in-process call into the live program"),
    }
    level("D1 native_free_continuation", *native.get(harness, ("n/a", "not judged by this probe")))
    if harness == "tmux":
        reachable, why = adapter_class("tmux")(session, session.get("options") or {}).pane_state()
        level("D2 receiver_armed", "pass" if reachable else "fail", "" if reachable else why)
    elif harness == "file":
        armed = _consumer_attached(paths.doorbells)
        level(
            "D2 receiver_armed",
            "pass" if armed else "partial",
            "" if armed else "no consumer attached now; entries wait durably in the inbox",
        )
    else:
        level(
            "D2 receiver_armed",
            "pass" if state.get("state") == "delivered" else "fail",
            state.get("reason") or "",
        )
    level(
        "D3 addressed_enqueue",
        "pass" if len(copies) == 1 else "fail",
        f"token={token} in {paths.inbox}",
    )
    if harness == "tmux":
        seen = "injected" in observed
        level(
            "D4 idle_active_wake",
            "pass" if seen else "fail",
            "line typed and submitted in the pane" if seen else state.get("reason") or "not seen",
        )
        level(
            "D5 context_injection",
            "partial" if seen else "fail",
            "one pointer line in the pane; the body is a file the agent must read",
        )
    elif harness == "callback":
        ok = state.get("state") == "delivered"
        level("D4 idle_active_wake", "pass" if ok else "fail", "")
        level("D5 context_injection", "pass" if ok else "fail", f"token={token}")
    else:
        level("D4 idle_active_wake", "n/a", "needs a harness hook or watcher on the wake file")
        level("D5 context_injection", "n/a", "the agent reads bodies with `actors inbox read`")
    level("D6 continuity", "n/a", "no model behind this adapter")
    level(
        "D7 completion_reply",
        "n/a" if harness != "tmux" else "fail",
        "no completion signal from this surface",
    )
    dedupe = len(copies) == 1
    level(
        "D8 robustness",
        "pass" if dedupe and harness in ("file", "webhook", "callback") else "partial",
        (
            "duplicate delivery id suppressed; durable inbox; journaled receipts; retries with backoff"
            if dedupe
            else "duplicate stored twice"
        ),
    )
    inbox.mark_read([delivery_id])
    runner.close(owner, delivery_id, "doctor probe: never retried")
    return lines


def _judge_injecting(
    level: Any,
    caps: Any,
    state: DeliveryRecord,
    observed: set[str],
    owner: str,
    token: str,
    copies: int,
    paths: Any,
) -> None:
    """Levels of an adapter that puts the body itself into the model's conversation
    (opencode, codex, pi): judged from the stages its receipt confirmed."""
    meta = state.get("metadata") or {}
    answered = state.get("state") in ("delivered", "accepted")
    level(
        "D1 native_free_continuation",
        "pass" if caps.native and answered else "fail",
        "into the running session itself"
        if caps.native
        else "a process we started, not the user's own session",
    )
    level("D2 receiver_armed", "pass" if answered else "fail", state.get("reason") or "")
    level(
        "D3 addressed_enqueue", "pass" if copies == 1 else "fail", f"token={token} in {paths.inbox}"
    )
    woke = "processed" in observed or meta.get("turn") is not None
    level(
        "D4 idle_active_wake",
        "pass" if woke else "fail",
        "the message started a turn with no typing"
        if woke
        else state.get("reason") or "no turn seen",
    )
    level(
        "D5 context_injection",
        "pass" if "injected" in observed else "fail",
        f"token={token} read back from the harness"
        if "injected" in observed
        else state.get("reason") or "",
    )
    level(
        "D6 continuity",
        "pass" if caps.native and "injected" in observed else "partial",
        f"same session ({meta.get('session') or meta.get('thread') or owner})",
    )
    done = "processed" in observed
    level(
        "D7 completion_reply",
        "pass" if done else "partial",
        f"turn completed after {meta.get('processed_ms')} ms"
        if done
        else "turn end not seen in time",
    )
    level(
        "D8 robustness",
        "pass" if copies == 1 else "fail",
        "duplicate id suppressed in the inbox and at the harness (marker checked before sending);"
        " journaled receipts; retries with backoff",
    )


def _judge_claude_code(
    level: Any,
    state: DeliveryRecord,
    owner: str,
    token: str,
    copies: int,
    paths: Any,
    delivery_id: str,
    wait_s: float = 10.0,
) -> None:
    """Claude Code is woken by its own FileChanged hook, which records each ring in
    `wakes.jsonl`: wait for the ring that names the probe (the file watcher settles for
    about 0.5 s first)."""
    import time

    from runtime.store.reads import read_jsonl

    started = time.monotonic()
    rang = False
    while not rang and time.monotonic() - started < wait_s:
        rang = any(delivery_id in (r.get("ids") or []) for r in read_jsonl(paths.wakes).records)
        if not rang:
            time.sleep(0.05)
    after = f"{(time.monotonic() - started) * 1000:.0f} ms"
    level("D1 native_free_continuation", "pass", "the running Claude Code session is woken itself")
    level(
        "D2 receiver_armed",
        "pass" if rang else "fail",
        "SessionStart watchPaths armed the wake file"
        if rang
        else "no FileChanged hook ran: is the session running with `actors install claude-code` hooks?",
    )
    level(
        "D3 addressed_enqueue", "pass" if copies == 1 else "fail", f"token={token} in {paths.inbox}"
    )
    level(
        "D4 idle_active_wake",
        "pass" if rang else "fail",
        f"FileChanged hook exited 2 (asyncRewake) after {after}"
        if rang
        else f"no wake within {wait_s:.0f} s",
    )
    level(
        "D5 context_injection",
        "partial" if rang else "fail",
        "the doorbell line reaches the model; the body is self-fetched with `actors inbox read`",
    )
    level("D6 continuity", "pass" if rang else "fail", f"same session ({owner})")
    level("D7 completion_reply", "n/a", "no turn-end signal is wired (a Stop hook could add one)")
    level(
        "D8 robustness",
        "pass" if copies == 1 else "fail",
        "duplicate id suppressed; level-triggered drain; the hook stays silent when nothing is unread",
    )

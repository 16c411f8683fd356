"""`actors doctor delivery` for a Claude Code session: judged from the wake log its own
FileChanged hook writes (adapters/claude_code/hooks.py), the one trace of a doorbell
that Claude Code itself rang."""

from __future__ import annotations

import time

from runtime.delivery.doctor import Probe
from runtime.store.reads import read_jsonl


def judge(probe: Probe, wait_s: float = 10.0) -> None:
    """Claude Code is woken by its own FileChanged hook, which records each ring in
    `wakes.jsonl`: wait for the ring that names the probe (the file watcher settles for
    about 0.5 s first)."""
    level, copies, token, paths = probe.level, probe.copies, probe.token, probe.paths
    started = time.monotonic()
    rang = False
    while not rang and time.monotonic() - started < wait_s:
        rang = any(
            probe.delivery_id in (r.get("ids") or [])
            for r in read_jsonl(paths.wakes).records
        )
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
    level("D6 continuity", "pass" if rang else "fail", f"same session ({probe.owner})")
    level("D7 completion_reply", "n/a", "no turn-end signal is wired (a Stop hook could add one)")
    level(
        "D8 robustness",
        "pass" if copies == 1 else "fail",
        "duplicate id suppressed; level-triggered drain; the hook stays silent when nothing is unread",
    )

"""`actors doctor delivery`: a live probe of a session's adapter, reported as D0-D8.

The probe is a real delivery (durable inbox, then the adapter) with a unique token; each
level is judged only from what was observed during the probe, and a level this adapter
cannot reach on its own says so (`n/a` or `fail`) with the reason. The probe entry is
marked read afterwards so it does not clutter the agent's inbox.

How the levels are judged: by the adapter's `judge_probe(probe)` (the contract), which
writes them from the `Probe` record. One that knows more about its harness declares it
(Claude Code's wake log, a tmux pane); `AdapterBase`'s default is `Probe.judge_generic`
here: adapters that inject the body itself (capabilities.injects) from the stages their
receipt confirmed, the rest (file, webhook, callback, third-party adapters) by the plain
judgement of a durable inbox.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.core import config
from runtime.core.errors import ActorsError
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.registry import adapter_class
from runtime.delivery.sessions import SessionInbox, load_session
from runtime.messaging.doorbells import open_bell
from runtime.messaging.envelope import build_envelope
from runtime.store import safe
from runtime.store.layout import SessionPaths, StateRoot, session_paths

if TYPE_CHECKING:
    from runtime.delivery.contract import Capabilities
    from runtime.delivery.records import DeliveryRecord


def _consumer_attached(doorbells: Any) -> bool:
    try:
        with safe.scandir(doorbells) as (directory, entries):
            for entry in entries:
                if not entry.name.endswith(".fifo"):
                    continue
                try:  # a FIFO only, never through a link
                    fd = open_bell(doorbells / entry.name, directory)
                except OSError:
                    continue  # ENXIO: nobody reading it
                if fd is not None:
                    os.close(fd)
                    return True
    except (OSError, ActorsError):  # missing, or a planted link
        return False
    return False


@dataclass
class Probe:
    """What one probe saw, and the report being written: what an adapter's
    `judge_probe` reads, and `level` is how it reports a verdict."""

    session: dict[str, Any]
    owner: str
    token: str
    delivery_id: str
    state: DeliveryRecord
    """The delivery's journaled state after the probe's attempt."""
    copies: int
    """Inbox entries with the probe's delivery id after submitting it twice."""
    paths: SessionPaths
    lines: list[str] = field(default_factory=list)

    @property
    def observed(self) -> set[str]:
        return set(self.state.get("observed") or [])

    @property
    def harness(self) -> str:
        return str(self.session.get("harness", "file"))

    def level(self, tag: str, verdict: str, why: str) -> None:
        self.lines.append(f"{tag}: {verdict}" + (f' reason="{why}"' if why else ""))

    def judge_generic(self, caps: Capabilities) -> None:
        """The judgement of an adapter that declares none of its own (`AdapterBase`)."""
        if caps.injects:
            _judge_injecting(self, caps)
        else:
            _judge_plain(self, self.harness)


def probe(root: StateRoot, owner: str) -> list[str]:
    session = load_session(root, owner)
    harness = session.get("harness", "file")
    cls = adapter_class(harness)
    caps = cls.capabilities
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
    copies = sum(1 for e in inbox.entries() if e["id"] == delivery_id)
    seen = Probe(session, owner, token, delivery_id, state, copies, paths)
    seen.lines += [
        "DELIVERY_LEVELS:",
        f"harness={harness}",
        f"transport={caps.wake_mode}",
        f"declared_level={caps.level}",
    ]
    registered = bool(session.get("registered", True)) and paths.record.exists()
    seen.level(
        "D0 live_session",
        "pass" if registered else "partial",
        f"session={owner}" if registered else "unregistered: default file session",
    )
    cls.judge_probe(seen)
    inbox.mark_read([delivery_id])
    runner.close(owner, delivery_id, "doctor probe: never retried")
    from runtime.compiler.redact import redact_text, secret_texts

    hidden = secret_texts(session.get("options") or {})  # an adapter's tokens, in a reason
    return [redact_text(line, hidden) for line in seen.lines]


_NATIVE = {
    "file": ("n/a", "no agent harness behind a file inbox"),
    "webhook": ("n/a", "a webhook receiver is not an agent session"),
    "callback": ("pass", "in-process call into the live program"),
}


def _judge_plain(seen: Probe, harness: str) -> None:
    """Levels of an adapter with no agent model of its own behind it (the durable inbox,
    a webhook, an in-process callback), or one this probe knows nothing more about."""
    level, state = seen.level, seen.state
    level("D1 native_free_continuation", *_NATIVE.get(harness, ("n/a", "not judged by this probe")))
    if harness == "file":
        armed = _consumer_attached(seen.paths.doorbells)
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
        "pass" if seen.copies == 1 else "fail",
        f"token={seen.token} in {seen.paths.inbox}",
    )
    if harness == "callback":
        ok = state.get("state") == "delivered"
        level("D4 idle_active_wake", "pass" if ok else "fail", "")
        level("D5 context_injection", "pass" if ok else "fail", f"token={seen.token}")
    else:
        level("D4 idle_active_wake", "n/a", "needs a harness hook or watcher on the wake file")
        level("D5 context_injection", "n/a", "the agent reads bodies with `actors inbox read`")
    level("D6 continuity", "n/a", "no model behind this adapter")
    level("D7 completion_reply", "n/a", "no completion signal from this surface")
    dedupe = seen.copies == 1
    level(
        "D8 robustness",
        "pass" if dedupe and harness in _NATIVE else "partial",
        (
            "duplicate delivery id suppressed; durable inbox; journaled receipts; retries with backoff"
            if dedupe
            else "duplicate stored twice"
        ),
    )


def _judge_injecting(seen: Probe, caps: Capabilities) -> None:
    """Levels of an adapter that puts the body itself into the model's conversation
    (opencode, codex, pi): judged from the stages its receipt confirmed."""
    level, state, observed, copies = seen.level, seen.state, seen.observed, seen.copies
    token, paths, owner = seen.token, seen.paths, seen.owner
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

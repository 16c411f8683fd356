"""Each session's deliveries as observed: every receipt, the stages it saw, and the
level the session's adapter declares beside the level its receipts have shown.

An adapter declares the highest delivery level it can reach (D0-D8, docs/adapters.md);
its receipts say which stages of queued -> triggered -> woke -> injected -> processed
each delivery actually went through. The observed level is the highest level those
stages prove, by the rules `actors doctor delivery` judges with: a durable, addressed
entry (queued) is D3, a turn started with no typing (woke) D4, the body read back from
the harness (injected) D5, the turn seen finishing (processed) D7. It reads the journal
only; `actors doctor delivery` is the live probe.
"""

from __future__ import annotations

from typing import Any, TypedDict

from runtime.compiler.redact import redact_session
from runtime.core.errors import ActorsError
from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.registry import adapter_class
from runtime.delivery.sessions import SessionInbox, list_sessions
from runtime.store.layout import session_paths

STAGES = ("queued", "triggered", "woke", "injected", "processed", "replied")
STAGE_LEVEL = {"queued": 3, "triggered": 3, "woke": 4, "injected": 5, "processed": 7, "replied": 7}
DELIVERIES = 50
"""The newest deliveries shown per session."""


class DeliveryRow(TypedDict):
    id: str
    type: str | None
    mode: str | None
    state: str | None
    receipt: str | None
    attempts: int
    observed: list[str]
    reason: str | None
    at: str | None
    run: str | None
    """The run the follow-up is about (its envelope's sender, `run:<id>`), or None."""
    summary: str | None


class SessionView(TypedDict):
    session: str
    harness: str
    registered: bool
    declared_level: str
    observed_level: str | None
    observed: list[str]
    """Every stage seen across the session's deliveries, in pipeline order."""
    total: int
    deliveries: list[DeliveryRow]
    record: dict[str, Any]


def _row(ident: str, state: dict[str, Any], envelope: dict[str, Any]) -> DeliveryRow:
    observed = [s for s in state.get("observed") or [] if isinstance(s, str)]
    if state.get("state") in ("queued", "delivered", "accepted") and "queued" not in observed:
        observed.insert(0, "queued")  # durable in the session inbox before any adapter ran
    return {
        "id": ident,
        "type": state.get("type"),
        "mode": state.get("mode"),
        "state": state.get("state"),
        "receipt": state.get("status") or state.get("event"),
        "attempts": int(state.get("attempts") or 0),
        "observed": [s for s in STAGES if s in observed],
        "reason": state.get("reason"),
        "at": state.get("ts"),
        "run": _run_of(envelope),
        "summary": envelope.get("summary") if isinstance(envelope.get("summary"), str) else None,
    }


def _run_of(envelope: dict[str, Any]) -> str | None:
    sender, body = envelope.get("from"), envelope.get("body")
    if isinstance(body, dict) and isinstance(body.get("run"), str):
        return str(body["run"])
    if isinstance(sender, str) and sender.startswith("run:"):
        return sender[4:].split("/", 1)[0]
    return None


def _envelopes(root: Any, owner: str) -> dict[str, dict[str, Any]]:
    """Delivery id -> its envelope, from the session's inbox (never compacted)."""
    try:
        entries = SessionInbox(session_paths(root, owner)).entries()
    except ActorsError:
        return {}
    return {str(e.get("id")): e["envelope"] for e in entries if isinstance(e.get("envelope"), dict)}


def declared_level(harness: str) -> str:
    try:
        return str(adapter_class(harness).capabilities.level)
    except Exception:  # an adapter that fails to load still has its session listed
        return "?"


def observed_level(stages: list[str]) -> str | None:
    best = max((STAGE_LEVEL[s] for s in stages if s in STAGE_LEVEL), default=None)
    return None if best is None else f"D{best}"


def sessions_view(root: Any, *, limit: int = DELIVERIES) -> list[SessionView]:
    """Every session of the root, its newest `limit` deliveries first."""
    runner = DeliveryRunner(root)
    out: list[SessionView] = []
    for record in list_sessions(root):
        owner = str(record.get("id"))
        states = runner.states(owner)
        envelopes = _envelopes(root, owner)
        rows = [_row(i, state, envelopes.get(i, {})) for i, state in states.items()]
        rows.sort(key=lambda r: r["at"] or "", reverse=True)
        seen = {s for r in rows for s in r["observed"]}
        stages = [s for s in STAGES if s in seen]
        harness = str(record.get("harness") or "file")
        out.append(
            {
                "session": owner,
                "harness": harness,
                "registered": bool(record.get("registered", True)),
                "declared_level": declared_level(harness),
                "observed_level": observed_level(stages),
                "observed": stages,
                "total": len(rows),
                "deliveries": rows[:limit],
                "record": redact_session(record),
            }
        )
    return out

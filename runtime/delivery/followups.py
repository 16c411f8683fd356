"""Follow-ups: what a run tells its coordinator, and handing it to delivery.

Rules (seed 003): terminal `done` / `failed` / `exited` transitions follow up; an
intentional stop (`actors cancel`, `actors kill`, `control.stop`, `control.kill`) does
not, since whoever stopped it already knows. Script-authored messages emitted with
`--deliver notify|followup` bubble; `command.done` bubbles for failed leaves and for
parallel branches that finish while siblings still run; successful sequential steps
stay diagnostic (outbox only).

Each follow-up has a delivery id derived from the run generation and the event, so the
runner, the reconciler and `actors watch` can all submit it and the session inbox keeps
one copy. A run's `followup.json` marker is written only after the follow-up is durable
in the session inbox; the reconciler submits again for any terminal run without one.

A follow-up goes to `runtime.delivery.engine.submit`, which finds the owner session's
adapter in the registry. Runs owned by another run (`run:<id>`) get their follow-ups as
messages in the parent run's inbox instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from runtime.core.faults import pause_point
from runtime.core.ids import now_iso
from runtime.messaging.envelope import build_envelope
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.reads import read_json, tail_jsonl
from runtime.store.writes import publish_json_once

if TYPE_CHECKING:
    from runtime.delivery.records import Handover
    from runtime.messaging.envelope import Envelope
    from runtime.store.records import ResultRecord, RunRecord


FOLLOW_STATUSES = ("done", "failed", "exited")
SEMANTIC_BODY_CHARS = 4000
MAX_ARTIFACTS = 4
_INTERNAL_TYPES = ("command.done", "run.done", "run.failed")





def _semantic(paths: RunPaths, run: RunRecord, result: ResultRecord) -> dict[str, Any]:
    """The run's own last word: its last declared emitted message, else its stdout head."""
    emits = {
        e["type"] if isinstance(e, dict) else str(e)
        for e in (run.get("mailbox") or {}).get("emits", [])
    }
    for message in reversed(tail_jsonl(paths.outbox, 200)):
        kind = message.get("type")
        if kind in emits and kind not in _INTERNAL_TYPES:
            body = message.get("body")
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            return {
                "type": kind,
                "summary": message.get("summary"),
                "body": text[:SEMANTIC_BODY_CHARS],
                "synthesized": False,
            }
    text = result.get("output") or result.get("reason") or ""
    return {
        "type": f"run.{result.get('status')}",
        "summary": None,
        "body": str(text)[:SEMANTIC_BODY_CHARS],
        "synthesized": True,
    }


def terminal_followup(paths: RunPaths, run: RunRecord, result: ResultRecord) -> Envelope | None:
    """The envelope for a terminal transition, or None when it must not follow up."""
    status = result.get("status")
    if status not in FOLLOW_STATUSES:
        return None
    run_id = run["run"]
    headline = f"Run {run_id} {status}"
    if status == "done" and result.get("degraded"):
        failed = [f.get("label") or f.get("node") for f in result.get("failures") or []]
        headline += f", degraded ({', '.join(map(str, failed[:3]))} failed)"
    elif status == "failed":
        headline += f" (code {result.get('code')}): {result.get('reason') or 'see actors result'}"
    elif status == "exited":
        headline += ": the runner vanished without a result"
    artifacts = {
        name: spec.get("path")
        for name, spec in list((result.get("artifacts") or {}).items())[:MAX_ARTIFACTS]
    }
    return build_envelope(
        type=f"run.{status}",
        to="coordinator",
        session=run.get("owner_id"),
        sender=f"run:{run_id}",
        summary=headline[:300],
        level="info" if status == "done" else "error",
        body={
            "run": run_id,
            "status": status,
            "code": result.get("code"),
            "degraded": bool(result.get("degraded")),
            "reason": result.get("reason"),
            "state_dir": str(paths.dir),
            "artifacts": artifacts,
            "result": _semantic(paths, run, result),
            "next": f"actors result {run_id}  (inspect only if this follow-up is not enough)",
        },
        extra={"reason": "notification", "idempotency_key": f"{run['run_instance_id']}:terminal"},
    )


def preload() -> None:
    """Import the delivery engine ahead of time (the runner calls this at start, so a
    run's end does not wait for imports); other callers load it on first use."""
    import runtime.delivery.engine  # noqa: F401  (deferred only for start-up cost)


def deliver(
    root: StateRoot,
    run: RunRecord,
    envelope: Envelope,
    *,
    mode: str = "immediate",
    budget_s: float = 0.0,
) -> Handover:
    """Hand a follow-up to its owner; durable in the owner's inbox when this returns."""
    from runtime.compiler.redact import redact_deep, run_secrets

    secrets = run_secrets(run)
    if secrets:  # the output head or an emitted body may quote a secret value
        envelope = redact_deep(envelope, secrets)
    owner = str(run.get("owner_id"))
    delivery_id = envelope.get("idempotency_key") or envelope["id"]
    if owner.startswith("run:"):
        return _to_parent_run(root, owner[4:], envelope, delivery_id)
    from runtime.delivery.engine import submit  # deferred for start-up cost

    return submit(root, owner, envelope, delivery_id=delivery_id, mode=mode, budget_s=budget_s)


def _to_parent_run(root: StateRoot, parent: str, envelope: Envelope, delivery_id: str) -> Handover:
    from runtime.core.errors import ActorsError
    from runtime.messaging.boxes import run_mailbox

    try:
        paths = root.run(parent)
        box = run_mailbox(paths)
        if any(e["id"] == delivery_id for e in box.entries()):
            return {"id": delivery_id, "state": "queued", "duplicate": True}
        box.deliver({**envelope, "id": delivery_id, "to": f"run:{parent}"})
    except (ActorsError, OSError) as exc:
        return {"id": delivery_id, "state": "failed", "reason": str(exc)}
    return {"id": delivery_id, "state": "queued", "route": f"run:{parent}"}


def follow_up_terminal(
    root: StateRoot, paths: RunPaths, run: RunRecord, *, budget_s: float = 0.0
) -> Handover | None:
    """Submit the terminal follow-up if due and not yet marked; write the marker after."""
    if paths.followup.exists():
        return None
    found = read_json(paths.result)
    if not isinstance(found, dict):
        return None
    result = cast("ResultRecord", found)  # published once, by the runner or cancel / kill
    envelope = terminal_followup(paths, run, result)
    if envelope is None:
        publish_json_once(
            paths.followup,
            {"delivery_id": None, "skipped": result.get("status"), "ts": now_iso()},
        )
        return None
    outcome = deliver(root, run, envelope, budget_s=budget_s)
    pause_point("followups.before_marker")
    if outcome.get("state") != "failed":
        publish_json_once(
            paths.followup,
            {
                "delivery_id": envelope["idempotency_key"],
                "ts": now_iso(),
                "outcome": outcome.get("state"),
            },
        )
    return outcome

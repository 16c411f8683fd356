"""Follow-ups: what a run tells its coordinator, and handing it to delivery.

Rules: one follow-up per run outcome. Terminal `done` / `failed` / `exited` transitions
follow up; an intentional stop (`actors cancel`, `actors kill`, `control.stop`,
`control.kill`) does not, since whoever stopped it already knows (except another
session's forced stop: its owner is told once, `forced_stop_followup`, when the run's
published outcome says it was stopped so, `forced_stopper`), and neither does
a run whose spawning caller is still blocked on its result (the runner checks that waiter's
proven identity, runtime.runner.lifecycle). Script-authored messages emitted with `--deliver
notify|followup` bubble (a run's decision points). `command.done` stays in the outbox
unless the recipe opts in by listing `command.done` in `mailbox.emits` (then failed
leaves and parallel branches that finish while siblings still run bubble too). Every
summary names the run and ends with the next step (`next: actors result ID`).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime.core.errors import ActorsError
from runtime.core.faults import pause_point
from runtime.core.ids import now_iso
from runtime.core.terminal import one_line
from runtime.messaging.envelope import build_envelope
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.reads import read_json, tail_jsonl
from runtime.store.writes import publish_json_once

if TYPE_CHECKING:
    from runtime.delivery.records import Handover
    from runtime.messaging.envelope import Envelope
    from runtime.store.records import ResultRecord, RunRecord


FOLLOW_STATUSES = ("done", "failed", "exited", "skipped")
SEMANTIC_BODY_CHARS = 4000
RESULT_LINE_CHARS = 160
"""Characters of a done run's own one-line result in its follow-up's summary."""
MAX_ARTIFACTS = 4
_INTERNAL_TYPES = ("command.done", "run.done", "run.failed")


def _last_emitted(paths: RunPaths, run: RunRecord) -> dict[str, Any] | None:
    """The run's last emitted message of a type its recipe declares (`mailbox.emits`)."""
    emits = {
        e["type"] if isinstance(e, dict) else str(e)
        for e in (run.get("mailbox") or {}).get("emits", [])
    }
    for message in reversed(tail_jsonl(paths.outbox, 200)):
        kind = message.get("type")
        if kind in emits and kind not in _INTERNAL_TYPES:
            return cast("dict[str, Any]", message)
    return None


def semantic_result(paths: RunPaths, run: RunRecord, result: ResultRecord) -> dict[str, Any]:
    """The run's own last word: its last declared emitted message, else its stdout head.
    A body is kept as the JSON value it was (an object stays an object) when it fits
    SEMANTIC_BODY_CHARS encoded, else it is the start of its text."""
    message = _last_emitted(paths, run)
    if message is not None:
        body = message.get("body")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        return {
            "type": message.get("type"),
            "summary": message.get("summary"),
            "body": body if len(text) <= SEMANTIC_BODY_CHARS else text[:SEMANTIC_BODY_CHARS],
            "synthesized": False,
        }
    text = result.get("output") or result.get("reason") or ""
    return {
        "type": f"run.{result.get('status')}",
        "summary": None,
        "body": str(text)[:SEMANTIC_BODY_CHARS],
        "synthesized": True,
    }


def result_line(paths: RunPaths, run: RunRecord, result: ResultRecord) -> str | None:
    """A done run's own one-line result, as the run wrote it: the summary of its last
    declared emitted message, else the last non-blank line of its output. Made inert (a
    control character is escaped), folded to one line and cut to RESULT_LINE_CHARS; None
    when the run wrote nothing. Callers quote it as run-written data (`quoted_result`)."""
    if result.get("status") != "done":
        return None
    message = _last_emitted(paths, run)
    said = ""
    if message is not None and message.get("summary") not in (None, "", message.get("type")):
        said = str(message["summary"])
    output = result.get("output_file")
    if not said and isinstance(output, str) and _inside(paths.dir, output):
        said = _last_line(Path(output))
    line = one_line(said, RESULT_LINE_CHARS)
    return line or None


def _inside(directory: Path, path: str) -> bool:
    """Whether `path` names a file under the run's own directory (result.json is the
    run's to rewrite: a path elsewhere is never read into a follow-up)."""
    import os

    normal = os.path.normpath(path)
    return os.path.isabs(normal) and Path(normal).is_relative_to(directory)


def _last_line(output: Path, budget: int = 64 * 1024) -> str:
    """The last non-blank line the run wrote to its output file (not a branch header of
    ours), reading at most `budget` bytes from its end (a longer line is its end), never
    through a symlink."""
    from runtime.store import safe
    from runtime.store.reads import read_bytes

    try:
        size = safe.lstat(output).st_size
        data = read_bytes(output, offset=max(0, size - budget), limit=budget)
    except (OSError, ActorsError):
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return next((line for line in reversed(lines) if line.strip() and not _ours(line)), "")


def _ours(line: str) -> bool:
    """A parallel run's branch header (runtime.runner.graph joins branch outputs under
    them; a branch's own line that looks like one is quoted `>--- branch`)."""
    return line.startswith("--- branch: ") and line.endswith(" ---")


def quoted_result(line: str) -> str:
    """The result line inside our words: one JSON string, so where it ends is plain (a
    quote inside is escaped) and it reads as the run's data, not ours."""
    return json.dumps(line, ensure_ascii=False)


def next_step(run_id: str) -> str:
    """The one line every follow-up ends its summary with: what to do next."""
    return f"next: actors result {run_id}"


def with_next(headline: str, run_id: str, limit: int = 300) -> str:
    """`headline; next: ...`, the headline cut so the next step always fits."""
    tail = f"; {next_step(run_id)}"
    room = limit - len(tail)
    if len(headline) > room:
        headline = headline[: room - 1] + "…"
    return headline + tail


def failure_line(failure: dict[str, Any] | None, command_chars: int = 80) -> str | None:
    """`[<label>: ]exited N: <last stderr line> (`<command, cut>`)`: the reason first, so
    a long command line never pushes it out of a bounded summary; None when unknown."""
    if not failure:
        return None
    label = failure.get("label")
    name = f"{label}: " if label else ""
    command = str(failure.get("command") or "")
    if not command:
        return f"{name}{failure.get('reason') or 'failed'}"
    if len(command) > command_chars:
        command = command[: command_chars - 1] + "…"
    said = [line.strip() for line in str(failure.get("stderr_tail") or "").splitlines()]
    said = [line for line in said if line]
    if failure.get("status") == "timeout":  # its exit code is the kill's, not its own
        line = f"{name}{failure.get('reason') or 'timed out'}"
    else:
        line = f"{name}exited {failure.get('exit_code', failure.get('code'))}"
    return f"{line}: {said[-1]} (`{command}`)" if said else f"{line} (`{command}`)"


def _headline(run_id: str, result: ResultRecord, said: str | None = None) -> str:
    status = result.get("status")
    headline = f"Run {run_id} {status}"
    if status == "done" and result.get("degraded"):
        failed = [f.get("label") or f.get("node") for f in result.get("failures") or []]
        headline += f", degraded ({', '.join(map(str, failed[:3]))} failed)"
    if said:
        headline += f": {quoted_result(said)}"
    elif status == "failed":
        why = failure_line(cast("dict[str, Any] | None", result.get("failure")))
        headline += (
            f" (code {result.get('code')}): {why or result.get('reason') or 'see actors result'}"
        )
    elif status == "exited":
        headline += ": the runner vanished without a result"
    elif status == "skipped":
        headline += f" ({result.get('reason') or 'a run it came after did not end done'})"
    return headline


def _failure_body(result: ResultRecord) -> dict[str, Any] | None:
    failure = result.get("failure")
    if not failure:
        return None
    keys = ("label", "node", "command", "exit_code", "reason", "stderr_tail", "stderr_file")
    found: dict[str, Any] = dict(failure)
    return {k: found[k] for k in keys if found.get(k) is not None}


def keep_offer(run: RunRecord, result: ResultRecord) -> str | None:
    """For a successful inline-template or ad-hoc recipe-file run: a question for the
    operator (never acted on without them) with the exact command that keeps it."""
    if result.get("status") != "done" or result.get("degraded"):
        return None
    if run.get("origin") not in ("template", "file") or not run.get("recipe_raw"):
        return None
    return (
        "This worked. Ask the operator whether to keep it as a reusable recipe (do not"
        " save it unasked); if they agree: actors tools register"
        f" {suggested_name(run)} --from-run {run['run']}"
    )


def suggested_name(run: RunRecord) -> str:
    """A tool name for a kept run: the recipe file's name, else the command's first word."""
    import re

    name = run.get("recipe") or ""
    if not name:
        words = (run.get("template") or {}).get("words") or []
        name = str(words[0]).rsplit("/", 1)[-1] if words else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("._-")[:40]
    return name if name and name[0].isalnum() else "my-tool"


def terminal_followup(paths: RunPaths, run: RunRecord, result: ResultRecord) -> Envelope | None:
    """The envelope for a terminal transition, or None when it must not follow up."""
    status = result.get("status")
    if status not in FOLLOW_STATUSES:
        by = forced_stopper(run, result)
        return forced_stop_followup(run, status, by) if by is not None else None
    run_id = run["run"]
    said = result_line(paths, run, result)
    artifacts = {
        name: spec.get("path")
        for name, spec in list((result.get("artifacts") or {}).items())[:MAX_ARTIFACTS]
    }
    body: dict[str, Any] = {
        "run": run_id,
        "status": status,
        "code": result.get("code"),
        "degraded": bool(result.get("degraded")),
        "reason": result.get("reason"),
        "failure": _failure_body(result),
        "state_dir": str(paths.dir),
        "artifacts": artifacts,
        "result": semantic_result(paths, run, result),
        "result_line": said,
        "next": f"actors result {run_id}  (inspect only if this follow-up is not enough)",
    }
    if body["failure"] is None:
        del body["failure"]
    offer = keep_offer(run, result)
    if offer:
        body["keep"] = offer
    return build_envelope(
        type=f"run.{status}",
        to="coordinator",
        session=run.get("owner_id"),
        sender=f"run:{run_id}",
        summary=with_next(_headline(run_id, result, said), run_id),
        level="info" if status == "done" else "error",
        body=body,
        extra={"reason": "notification", "idempotency_key": f"{run['run_instance_id']}:terminal"},
    )


def forced_stopper(run: RunRecord, result: ResultRecord) -> str | None:
    """Who stopped this run with `--force` when its owner must be told: the published
    outcome is `cancelled` / `killed` (a run that ended `done` first is followed up as
    done, never as stopped), by another session than its owner, and the owner is a
    session (a parent run is rung when its child ends, `ring_parent`). The name is made
    inert and cut: result.json is the run's to rewrite."""
    stopped = result.get("stopped")
    if result.get("status") not in ("cancelled", "killed") or not isinstance(stopped, dict):
        return None
    by, owner = stopped.get("by"), str(run.get("owner_id"))
    if stopped.get("forced") is not True or not isinstance(by, str) or by == owner:
        return None
    if owner.startswith("run:"):
        return None
    return one_line(by, 80) or None


def forced_stop_followup(run: RunRecord, status: str, by: str) -> Envelope:
    """The one follow-up of a stop its owner did not make: another session's `cancel` or
    `kill --force`. Whoever stops their own run knows already (no follow-up); an owner whose
    run another session stopped would otherwise learn of it from nobody."""
    run_id = run["run"]
    return build_envelope(
        type=f"run.{status}",
        to="coordinator",
        session=run.get("owner_id"),
        sender=f"run:{run_id}",
        summary=with_next(f"Run {run_id} {status} by {by} (forced)", run_id),
        level="warning",
        body={"run": run_id, "status": status, "by": by, "forced": True},
        extra={"reason": "notification", "idempotency_key": f"{run['run_instance_id']}:forced"},
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
        return to_parent_run(root, owner[4:], envelope, delivery_id)
    from runtime.delivery.engine import submit  # deferred for start-up cost

    return submit(root, owner, envelope, delivery_id=delivery_id, mode=mode, budget_s=budget_s)


def to_parent_run(root: StateRoot, parent: str, envelope: Envelope, delivery_id: str) -> Handover:
    from runtime.core.errors import TRANSIENT, ActorsError, os_errno
    from runtime.messaging.boxes import run_mailbox

    try:
        paths = root.run(parent)
        box = run_mailbox(paths)
        if any(e["id"] == delivery_id for e in box.entries()):
            return {"id": delivery_id, "state": "queued", "duplicate": True}
        box.deliver({**envelope, "id": delivery_id, "to": f"run:{parent}"})
    except (ActorsError, OSError) as exc:
        if os_errno(exc) in TRANSIENT:
            raise  # a full disk: the caller may wait it out (a runner's end does)
        return {"id": delivery_id, "state": "failed", "reason": str(exc)}
    return {"id": delivery_id, "state": "queued", "route": f"run:{parent}"}


def skip_waited(paths: RunPaths, waiter_pid: int) -> None:
    """Mark the terminal follow-up as not owed: the caller that spawned the run is still
    blocked on its result (`spawn --wait`, a foreground `actors run`) and prints it."""
    publish_json_once(
        paths.followup,
        {"delivery_id": None, "skipped": "waited", "waiter_pid": waiter_pid, "ts": now_iso()},
    )
    run = read_json(paths.run_json)
    if isinstance(run, dict):
        ring_parent(StateRoot(paths.dir.parent.parent), cast("RunRecord", run))


def ring_parent(root: StateRoot, run: RunRecord) -> None:
    """A run owned by another run ended without a follow-up to it (an intentional stop,
    or its caller waited for the result): ring the parent's `run` doorbell anyway, so a
    parent retiring when its children end (`retire_when`) learns of it without a timer.
    Only a wake: a parent with no such watcher ignores it."""
    owner = str(run.get("owner_id"))
    if not owner.startswith("run:"):
        return
    from runtime.core.errors import ActorsError
    from runtime.messaging.doorbells import ring

    try:
        ring(root.run(owner[4:]).doorbells, "run.ended")
    except (ActorsError, OSError):
        pass  # no such parent any more: nobody to wake


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
        ring_parent(root, run)
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

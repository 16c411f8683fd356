"""A run's status, derived on every read from its files and its live process.

Order of evidence: result.json (written once, by whoever ends the run) is final; else a
runner whose recorded identity still verifies is `running`; else the last stop request in
events.jsonl says `killed` or `cancelled`; else the runner vanished without a word and the
run is `exited`. A pid that now belongs to another process, or one we cannot verify, is
never reported as running.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.errors import NotFound, StateDamaged
from runtime.events import STOP_EVENTS
from runtime.files import read_json, tail_jsonl
from runtime.ids import parse_iso
from runtime.paths import RunPaths, StateRoot
from runtime.process import verify

TERMINAL = ("done", "failed", "cancelled", "killed", "exited")
ACTIVE = ("starting", "running")
STARTING_GRACE_S = 10.0


def load_run(paths: RunPaths) -> dict[str, Any]:
    """run.json of a run; NotFound / StateDamaged with a clear message otherwise."""
    if not paths.dir.is_dir():
        raise NotFound(f"no run {paths.run_id}", hint="`actors ls` lists the runs")
    record = read_json(paths.run_json)
    if not isinstance(record, dict):
        if record is None:
            raise StateDamaged(f"run {paths.run_id} has no run.json", hint="it may be starting")
        raise StateDamaged(f"run {paths.run_id}: run.json is not an object")
    return record


def find_run(root: StateRoot, run_id: str) -> tuple[RunPaths, dict[str, Any]]:
    paths = root.run(run_id)
    return paths, load_run(paths)


def runner_identity(paths: RunPaths, run: dict[str, Any]) -> dict[str, Any] | None:
    """The runner's recorded identity (run.json, else its own start event)."""
    identity = run.get("process_identity")
    if identity:
        return dict(identity)
    for event in reversed(tail_jsonl(paths.events, 50)):
        if event.get("event") == "run.runner.start" and event.get("process_identity"):
            return dict(event["process_identity"])
    return None


def _stop_request(paths: RunPaths) -> str | None:
    for event in reversed(tail_jsonl(paths.events, 200)):
        status = STOP_EVENTS.get(str(event.get("event")))
        if status:
            return status
    return None


def derive(paths: RunPaths, run: dict[str, Any]) -> dict[str, Any]:
    """Status summary of one run (no side effects)."""
    out: dict[str, Any] = {
        "run": run.get("run", paths.run_id),
        "address": f"run:{paths.run_id}",
        "state_dir": str(paths.dir),
        "recipe": run.get("recipe"),
        "tool": run.get("tool"),
        "owner_id": run.get("owner_id"),
        "parent": run.get("parent"),
        "created_at": run.get("created_at"),
        "pid": run.get("pid"),
        "code": None,
        "degraded": False,
        "ended_at": None,
    }
    try:
        result = read_json(paths.result)
    except StateDamaged as exc:
        result, out["damaged"] = None, exc.message
    if isinstance(result, dict) and result.get("status") in TERMINAL:
        out.update(
            status=result["status"],
            code=result.get("code"),
            degraded=bool(result.get("degraded")),
            ended_at=result.get("ended_at"),
            reason=result.get("reason"),
            from_result=True,
        )
        return out
    identity = runner_identity(paths, run)
    verdict, reason = verify(identity) if identity else ("unverifiable", "no pid yet")
    if verdict == "valid":
        out["status"] = "running"
    elif identity is None and _young(run):
        out["status"] = "starting"
    else:
        out["status"] = _stop_request(paths) or "exited"
        out["code"] = {"killed": 137, "cancelled": 143}.get(out["status"])
        out["reason"] = reason
    out["process"] = verdict
    return out


def _young(run: dict[str, Any]) -> bool:
    try:
        return time.time() - parse_iso(str(run.get("created_at"))) < STARTING_GRACE_S
    except ValueError:
        return False


def status_of(root: StateRoot, run_id: str) -> dict[str, Any]:
    """Full status: derived state plus progress counters."""
    paths, run = find_run(root, run_id)
    out = derive(paths, run)
    try:
        progress = read_json(paths.progress) or {}
    except StateDamaged:
        progress = {}
    for key in ("phase", "active", "completed", "failed", "branches"):
        if key in progress:
            out[key] = progress[key]
    return out

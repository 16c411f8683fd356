"""Cancel and kill: act on a run's whole process tree, and only on the right process.

Both verify the caller may control the run, then that the recorded runner is still the
same process (pidfd + start ticks + argv + cwd). A mismatch is refused and nothing is
signalled. The stop request is journaled before the signal, and the terminal record is
published (once) after every process of the run's session is gone. Which processes are
the run's is proven at the instant of each signal (runtime.core.members): the session of
the verified, frozen runner, or, once the runner has exited, only members whose
environment carries the run's marks; never the session id recorded in run.json.
"""

from __future__ import annotations

import contextlib
import signal
from typing import TYPE_CHECKING, Any

from runtime.core.errors import (
    TRANSIENT,
    ActorsError,
    Conflict,
    Refused,
    StateDamaged,
    os_errno,
)
from runtime.core.ids import now_iso
from runtime.core.members import kill_orphans, kill_tree, run_marks
from runtime.core.process import send_verified, verify, wait_gone
from runtime.runs.events import record_event, write_progress
from runtime.runs.ownership import Principal, check_control
from runtime.runs.status import TERMINAL, derive, find_run, runner_identity
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import publish_json_once

if TYPE_CHECKING:
    from runtime.store.records import ResultRecord, RunRecord, RunStatus

CANCEL_GRACE_S = 5.0


def _prepare(
    root: StateRoot, run_id: str, principal: Principal, force: bool, action: str
) -> tuple[RunPaths, RunRecord, dict[str, Any]]:
    paths, run = find_run(root, run_id)
    check_control(run, principal, force=force, action=action)
    summary = derive(paths, run)
    if summary.get("process") in ("mismatch", "unverifiable"):
        raise Refused(
            f"run {run_id}: {summary['reason']}; refusing to signal it",
            hint="the recorded runner cannot be verified, so the run is reported as "
            f"{summary['status']}; nothing was signalled",
        )
    if summary["status"] in TERMINAL:
        raise Conflict(
            f"run {run_id} already finished ({summary['status']}); nothing to {action}",
            hint=f"see `actors result {run_id}`",
        )
    identity = runner_identity(paths, run)
    verdict, reason = verify(identity)
    if verdict != "valid" or identity is None:
        raise Refused(
            f"run {run_id}: {reason}; refusing to signal it",
            hint="the recorded process no longer matches; `actors status` reports the run",
        )
    return paths, run, identity


def _publish(paths: RunPaths, run: RunRecord, status: str, code: int, reason: str) -> None:
    """Record the terminal state unless the runner already did (it is gone by now). On
    a disk that takes nothing more, the run is stopped all the same and its status comes
    from the stop request journaled before the signal (docs/state-files.md, *How status
    is derived*): the stop is not reported as failed for want of its record."""
    try:
        _record_end(paths, run, status, code, reason)
    except ActorsError as exc:
        if os_errno(exc) not in TRANSIENT:
            raise


def _record_end(paths: RunPaths, run: RunRecord, status: str, code: int, reason: str) -> None:
    if paths.result.exists():
        return
    instance = run["run_instance_id"]
    try:
        last = read_json(paths.progress) or {}
    except StateDamaged:
        last = {}
    counts = {k: last[k] for k in ("completed", "failed") if k in last}
    write_progress(paths.progress, instance, phase=status, active=0, **counts)
    record_event(paths.events, instance, f"run.{status}", fsync=True, code=code, reason=reason)
    short: ResultRecord = {
        "run": run["run"],
        "run_instance_id": instance,
        "status": status,
        "code": code,
        "killed": status == "killed",
        "degraded": False,
        "reason": reason,
        "started_at": run.get("created_at"),
        "ended_at": now_iso(),
    }
    publish_json_once(paths.result, short)
    # The runner died without its end-of-run work (perhaps even before it told its
    # guardians it was up): wake them, so one folds the run now (its follow-up marker,
    # the parent's doorbell) instead of at the next `actors reconcile`.
    from runtime.messaging.doorbells import ring  # deferred: only a stop needs these
    from runtime.runs.launch import guardian_bells

    with contextlib.suppress(ActorsError, OSError):  # nobody to tell: reconcile folds it
        ring(guardian_bells(StateRoot(paths.dir.parent.parent), str(run.get("owner_id"))))


def _kill_everything(paths: RunPaths, run: RunRecord, identity: dict[str, Any]) -> int:
    """Freeze the runner (so its descendants stay linked to it), kill the whole tree,
    then whatever proven orphan of the run is left (the runner died under us)."""
    return kill_tree(identity) + _kill_orphans(paths, run, identity)


def _kill_orphans(paths: RunPaths, run: RunRecord, identity: dict[str, Any]) -> int:
    """The runner is gone: stop only the members proven to be this run's now."""
    ticks = identity.get("start_ticks")
    return kill_orphans(
        int(identity["pid"]),
        run_marks(run["run_instance_id"], str(paths.dir)),
        since_ticks=ticks if isinstance(ticks, int) else None,
    )


def kill(root: StateRoot, run_id: str, principal: Principal, *, force: bool = False) -> RunStatus:
    """SIGKILL the runner and every process of its session; status becomes `killed`."""
    paths, run, identity = _prepare(root, run_id, principal, force, "kill")
    record_event(
        paths.events,
        run["run_instance_id"],
        "run.kill",
        signal="SIGKILL",
        pid=identity["pid"],
        signal_target="session",
        by=principal.id,
    )
    _kill_everything(paths, run, identity)
    _publish(paths, run, "killed", 137, f"killed by {principal.id}")
    return derive(paths, run)


def cancel(
    root: StateRoot,
    run_id: str,
    principal: Principal,
    *,
    force: bool = False,
    grace: float = CANCEL_GRACE_S,
) -> RunStatus:
    """Graceful stop: SIGTERM, wait for the runner to wind down, then SIGKILL what is left."""
    paths, run, identity = _prepare(root, run_id, principal, force, "cancel")
    record_event(
        paths.events,
        run["run_instance_id"],
        "run.cancel",
        signal="SIGTERM",
        pid=identity["pid"],
        grace_s=grace,
        by=principal.id,
    )
    verdict, _ = send_verified(identity, signal.SIGTERM)
    if verdict == "valid" and wait_gone([int(identity["pid"])], timeout=grace + 2.0):
        _kill_orphans(paths, run, identity)
    else:
        _kill_everything(paths, run, identity)
    _publish(paths, run, "cancelled", 143, f"cancelled by {principal.id}")
    return derive(paths, run)

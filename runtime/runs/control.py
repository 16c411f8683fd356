"""Cancel and kill: act on a run's whole process tree, and only on the right process.

Kill always kills, whatever the run did to its own files. It needs no journal write and
no lock before it acts: the intent goes to `stop.json` by an atomic rename (best effort;
a full disk does not stop a kill), then every process of the run is stopped, then the
records are written as far as they can be (a lock held by a stopped process is waited
for only briefly; a planted link is refused, not written through). Which processes are
the run's is proven at the instant they are stopped:

- its cgroup (runtime.core.cgroups), found by name from the state root and the run id
  alone: `cgroup.kill` stops every process the run ever started, a double-forked daemon
  included, with no pid read first;
- where there is no cgroup, the verified, frozen runner's session and descendants, and
  then members carrying the run's marks (runtime.core.members); never the session id
  recorded in run.json.

A run.json the run has damaged cannot name its owner: such a run is stopped only with
`--force`, through its cgroup.
"""

from __future__ import annotations

import contextlib
import signal
from typing import TYPE_CHECKING, Any, NamedTuple

from runtime.core import cgroups
from runtime.core.errors import ActorsError, Conflict, Refused, StateDamaged
from runtime.core.ids import now_iso
from runtime.core.members import kill_orphans, kill_tree, run_marks
from runtime.core.process import send_verified, verify, wait_gone
from runtime.runs.ownership import Principal, check_control
from runtime.store.events import record_event, write_progress
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.writes import publish_json_once, write_json_atomic
from runtime.views.counts import final_counts, journal_counts
from runtime.views.status import TERMINAL, derive, load_run, runner_identity

if TYPE_CHECKING:
    from pathlib import Path

    from runtime.store.records import ResultRecord, RunRecord, RunStatus

CANCEL_GRACE_S = 5.0
RECORD_WAIT_S = 2.0
"""How long a kill's records wait for a journal lock after the kill (its holder, if it
was one of the run's processes, is dead by then; a stopped stranger is not waited on)."""


class Target(NamedTuple):
    """What a stop acts on, as proven now."""

    paths: RunPaths
    run: RunRecord | None
    """None: run.json is damaged (only reached with --force)."""
    identity: dict[str, Any] | None
    """The runner's recorded identity, when it verifies now."""
    groups: list[Path]
    """The run's cgroups that hold a process now."""
    forced: bool = False
    """Allowed only by --force: the run is another session's (its owner is told once, by
    the follow-up of the stopped outcome)."""


def _target(root: StateRoot, run_id: str, principal: Principal, force: bool, action: str) -> Target:
    paths = root.run(run_id)
    try:
        run: RunRecord | None = load_run(paths)
    except StateDamaged as exc:
        if not force:
            raise Refused(
                f"run {run_id}: {exc.message}, so its owner cannot be checked",
                hint=f"pass --force to {action} it anyway",
            ) from None
        run = None
    forced = run is not None and check_control(
        run, principal, force=force, action=action, root=root
    )
    recorded = run.get("cgroup") if run is not None else None
    groups = [
        g
        for g in cgroups.groups_of(
            root.path, run_id, recorded if isinstance(recorded, str) else None
        )
        if cgroups.populated(g)
    ]
    identity = _verified_runner(paths, run) if run is not None else None
    if groups or identity is not None:
        return Target(paths, run, identity, groups, forced)
    if run is None:
        raise Refused(f"run {run_id}: no live process of it can be proven; nothing was signalled")
    summary = _summary(paths, run)
    if summary.get("process") in ("mismatch", "unverifiable"):
        raise Refused(
            f"run {run_id}: {summary.get('reason')}; refusing to signal it",
            hint="the recorded runner cannot be verified, so the run is reported as "
            f"{summary.get('status')}; nothing was signalled",
        )
    if summary.get("status") in TERMINAL:
        raise Conflict(
            f"run {run_id} already finished ({summary['status']}); nothing to {action}",
            hint=f"see `actors result {run_id}`",
        )
    raise Refused(
        f"run {run_id}: its runner is not up yet; nothing was signalled", hint="try again"
    )


def _summary(paths: RunPaths, run: RunRecord) -> dict[str, Any]:
    try:
        return dict(derive(paths, run))
    except StateDamaged as exc:
        return {"status": "damaged", "reason": exc.message}


def _verified_runner(paths: RunPaths, run: RunRecord) -> dict[str, Any] | None:
    try:
        identity = runner_identity(paths, run)
    except StateDamaged:
        identity = run.get("process_identity") or None
    if identity is None or verify(identity)[0] != "valid":
        return None
    return identity


def _intend(target: Target, action: str, principal: Principal) -> None:
    """Say a stop was asked for before anything is signalled (an atomic write, no
    lock): a watcher that sees the runner die folds it as stopped, not `exited`.
    Best effort: a kill goes on when even this cannot be written."""
    instance = target.run["run_instance_id"] if target.run is not None else None
    intent = {
        "action": action,
        "by": principal.id,
        "forced": target.forced,
        "ts": now_iso(),
        "run_instance_id": instance,
    }
    with contextlib.suppress(OSError, ActorsError):
        write_json_atomic(target.paths.stop_request, intent, fsync=True)


def _record(target: Target, event: str, **fields: Any) -> None:
    """A record after the fact, as far as it can be written."""
    if target.run is None:
        return
    with contextlib.suppress(OSError, ActorsError):
        record_event(
            target.paths.events,
            target.run["run_instance_id"],
            event,
            wait_s=RECORD_WAIT_S,
            **fields,
        )


def _publish(target: Target, status: str, code: int, reason: str, principal: Principal) -> None:
    """Record the terminal state unless the runner already did (it is gone by now), then
    fold it: its follow-up is decided from the outcome published, whoever published it
    (runtime.delivery.followups: only another session's forced stop tells the owner)."""
    paths, run = target.paths, target.run
    if run is None:
        return
    with contextlib.suppress(OSError, ActorsError):
        if paths.result.exists():
            return
        instance = run["run_instance_id"]
        counts = journal_counts(paths, instance)  # the steps as the runner left them
        with contextlib.suppress(OSError, ActorsError):
            write_progress(paths.progress, instance, phase=status, **counts)
        _record(target, f"run.{status}", fsync=True, code=code, reason=reason)
        short: ResultRecord = {
            "run": run["run"],
            "run_instance_id": instance,
            "status": status,
            "code": code,
            "killed": status == "killed",
            "degraded": False,
            "reason": reason,
            "stopped": {"by": principal.id, "forced": target.forced},
            "started_at": run.get("created_at"),
            "ended_at": now_iso(),
        }
        if not publish_json_once(paths.result, {**short, **final_counts(counts)}):
            return  # the runner published first: its own end follows it up
    # The runner died without its end-of-run work (perhaps even before it told its
    # guardians it was up): fold the run now (its follow-up or marker, the parent's
    # doorbell), and wake the guardians in case this cannot, instead of waiting for the
    # next `actors reconcile`.
    from runtime.messaging.doorbells import ring  # deferred: only a stop needs these
    from runtime.runner.bells import guardian_bells
    from runtime.runner.fold import fold_run

    root = StateRoot(paths.dir.parent.parent)
    with contextlib.suppress(ActorsError, OSError):  # a guardian or reconcile folds it
        fold_run(root, paths)
    with contextlib.suppress(ActorsError, OSError):  # nobody to tell: reconcile folds it
        ring(guardian_bells(root, str(run.get("owner_id"))))


def _kill_everything(target: Target) -> int:
    """Every process of the run, by every proof that holds: its cgroups at once; the
    frozen, verified runner's tree (a runner not yet in its cgroup); then proven
    orphans of a runner that died under us."""
    killed = cgroups.kill(target.groups) if target.groups else 0
    if target.identity is not None:
        killed += kill_tree(target.identity)
        killed += _kill_orphans(target)
    return killed


def _kill_orphans(target: Target) -> int:
    """The runner is gone: stop only the members proven to be this run's now."""
    if target.run is None or target.identity is None:
        return 0
    ticks = target.identity.get("start_ticks")
    return kill_orphans(
        int(target.identity["pid"]),
        run_marks(target.run["run_instance_id"], str(target.paths.dir)),
        since_ticks=ticks if isinstance(ticks, int) else None,
    )


def _status(target: Target) -> RunStatus:
    if target.run is None:
        return {"run": target.paths.run_id, "status": "killed", "damaged": "run.json"}  # type: ignore[typeddict-item]
    try:
        return derive(target.paths, target.run)
    except StateDamaged as exc:
        return {"run": target.paths.run_id, "status": "killed", "damaged": exc.message}  # type: ignore[typeddict-item]


def kill(root: StateRoot, run_id: str, principal: Principal, *, force: bool = False) -> RunStatus:
    """SIGKILL every process of the run; status becomes `killed`."""
    target = _target(root, run_id, principal, force, "kill")
    _intend(target, "kill", principal)
    pid = target.identity["pid"] if target.identity else None
    _kill_everything(target)
    _record(
        target,
        "run.kill",
        signal="SIGKILL",
        pid=pid,
        signal_target="cgroup" if target.groups else "session",
        by=principal.id,
    )
    _publish(target, "killed", 137, f"killed by {principal.id}", principal)
    return _status(target)


def cancel(
    root: StateRoot,
    run_id: str,
    principal: Principal,
    *,
    force: bool = False,
    grace: float = CANCEL_GRACE_S,
) -> RunStatus:
    """Graceful stop: SIGTERM to the runner, a wait for it to wind down (it stops its
    commands the same way), then SIGKILL to whatever of the run is left."""
    target = _target(root, run_id, principal, force, "cancel")
    _intend(target, "cancel", principal)
    _record(
        target,
        "run.cancel",
        signal="SIGTERM",
        pid=target.identity and target.identity["pid"],
        grace_s=grace,
        by=principal.id,
    )
    identity = target.identity
    ended = False
    if identity is not None and send_verified(identity, signal.SIGTERM)[0] == "valid":
        ended = wait_gone([int(identity["pid"])], timeout=grace + 2.0)
    if ended:
        _kill_orphans(target)
        # what is left in its cgroup (the runner ended its own; a daemon it could not)
        if target.groups:
            cgroups.kill([g for g in target.groups if cgroups.populated(g)])
    else:
        _kill_everything(target)
    _publish(target, "cancelled", 143, f"cancelled by {principal.id}", principal)
    return _status(target)

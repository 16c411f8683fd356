"""Folding a run whose runner is gone: finish what it could not, deliver what is owed.

`fold_run` finishes one run, under the run's fold lock: the guardians
(runtime.runner.guardian) fold the runs of their owner as their runners die, and
`actors reconcile` (runtime.runs.reconcile) folds every run. For each run whose runner
is gone without a result and without a stop request: stop the
survivors of its session that are proven to be the run's now (runtime.core.members: their
environment carries the run's instance and state directory; the dead runner's recorded
session id alone proves nothing), publish once what its events.jsonl proves of its
outcome (runtime.views.status.proven_end), else `exited`, and follow up. For each terminal
run without a follow-up marker: follow up (deduplicated by delivery id). Safe to run
from any number of processes at once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.errors import ActorsError
from runtime.core.ids import now_iso
from runtime.core.members import kill_orphans, run_marks
from runtime.core.process import is_gone, verify
from runtime.store import safe
from runtime.store.appends import locked
from runtime.store.events import record_event, write_progress
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.writes import publish_json_once, temp_writer
from runtime.views.counts import final_counts, journal_counts
from runtime.views.status import (
    derive,
    load_run,
    proven_end,
    proven_reason,
    runner_identity,
)

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


def _sweep_dead_writers(directory: Path) -> None:
    """Remove temp files (`.<name>.<pid>.<hex>.tmp`) of atomic writes whose writer died
    between writing and renaming them; a live writer's (or a reused pid's) are kept."""
    with contextlib.suppress(OSError, ActorsError), safe.scandir(directory) as (fd, entries):
        for entry in entries:
            writer = temp_writer(entry.name)
            if writer is not None and is_gone(writer):
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)


def _kill_orphans(run_dir: Path, run: Any, identity: dict[str, Any]) -> int:
    """Stop what the dead runner left behind: its cgroup whole, where it had one, then
    the members of its session proven to be this run's."""
    from runtime.core import cgroups

    recorded = run.get("cgroup")
    groups = cgroups.groups_of(
        run_dir.parent.parent, run_dir.name, recorded if isinstance(recorded, str) else None
    )
    killed = cgroups.kill(groups) if groups else 0
    sid = identity.get("sid") or identity.get("pid")
    ticks = identity.get("start_ticks")
    return killed + kill_orphans(
        sid if isinstance(sid, int) else None,
        run_marks(str(run.get("run_instance_id")), str(run_dir)),
        since_ticks=ticks if isinstance(ticks, int) else None,
        boot=identity.get("boot_id") if isinstance(identity.get("boot_id"), str) else None,
    )


def _exited(paths: RunPaths, run: RunRecord) -> bool:
    """Publish the end of a run whose runner is gone without a result (and without a
    stop request), after stopping its proven orphans: what events.jsonl proves of its
    outcome (runtime.views.status.proven_end), else `exited`. True when this call
    published it."""
    identity = runner_identity(paths, run)
    verdict, reason = verify(identity) if identity else ("unverifiable", "no identity")
    if verdict in ("dead", "mismatch") and identity is not None:
        # mismatch: the pid is another process's now, so the runner is dead too; only
        # members carrying the run's marks are stopped, never the pid's new owner
        _kill_orphans(paths.dir, run, identity)
    instance = run["run_instance_id"]
    proven = proven_end(paths, run)
    counts = journal_counts(paths, instance)
    result: dict[str, Any] = {
        "run": run["run"],
        "run_instance_id": instance,
        "status": "exited",
        "code": None,
        "killed": False,
        "degraded": False,
        "reason": f"runner gone without a result ({reason})",
        **final_counts(counts),
        "ended_at": now_iso(),
    }
    if proven is not None:
        result.update(
            status=proven["status"],
            code=proven["code"],
            killed=proven["status"] == "killed",
            degraded=proven["degraded"],
            reason=proven_reason(proven, reason),
            ended_at=proven["ended_at"] or result["ended_at"],
            folded="events.jsonl",
        )
        _add_command_output(run, proven, result)
    if not publish_json_once(paths.result, result):
        return False
    event = "run.exited" if proven is None else "run.folded"
    write_progress(paths.progress, instance, phase=result["status"], **counts)
    record_event(
        paths.events, instance, event, fsync=True, status=result["status"], reason=result["reason"]
    )
    return True


def _add_command_output(run: RunRecord, proven: dict[str, Any], result: dict[str, Any]) -> None:
    """A run folded from its one command's `command.done`: that command's output (the
    capture of the stream its template names), and its declared artifacts, as the
    runner would have published them (a required one missing fails a done run)."""
    from runtime.runner.output import output_preview
    from runtime.views.artifacts import manifest, missing_required

    done = proven.get("command") or {}
    kind = (run.get("template") or {}).get("output") or "stdout"
    output = done.get(f"{kind}_file") if kind in ("stdout", "stderr") else None
    if isinstance(output, str):
        with contextlib.suppress(OSError, ActorsError):
            result.update(output_file=output, output=output_preview(Path(output)))
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        artifacts = manifest(run.get("artifacts") or {})
        result["artifacts"] = artifacts
        missing = missing_required(artifacts)
        if missing and result["status"] == "done":
            result.update(
                status="failed", code=1, reason=f"required artifact missing: {missing[0]}"
            )


def fold_run(root: StateRoot, paths: RunPaths, *, deliver: bool = True) -> dict[str, Any]:
    """Finish one run whose runner is gone: `exited` if it left no result, then its
    follow-up if none is marked. Under the run's fold lock, with the status derived again
    inside it, so any number of watchers racing for the same dead run (guardians,
    `actors reconcile`, `actors watch`) publish one result and submit one follow-up.
    Returns {"exited": bool, "followed_up": bool}."""
    from runtime.delivery.followups import follow_up_terminal

    report = {"exited": False, "followed_up": False}
    if paths.followup.exists():
        return report  # settled: the common case takes no lock
    run = load_run(paths)
    with locked(paths.fold_lock):
        if paths.followup.exists():
            return report  # another watcher folded it while we waited
        summary = derive(paths, run) if not paths.result.exists() else None
        if summary is not None and (summary.get("status") == "exited" or summary.get("proven")):
            report["exited"] = _exited(paths, run)
        if paths.result.exists():
            _sweep_dead_writers(paths.dir)
            if deliver:
                report["followed_up"] = follow_up_terminal(root, paths, run) is not None
    if paths.result.exists():
        reap_placed(root, paths)
    return report


def reap_placed(root: StateRoot, paths: RunPaths) -> None:
    """The run has ended: if any of its commands started a run on a host (`actors host
    step`), `actors host reap` kills there what of those is still out, detached (its own
    session, started after the run's sweep: nothing of the run outlives it, and this
    must). The runs on a host are the host's, so the runner (below the hosts room) only
    starts the command that stops them."""
    import subprocess
    import sys

    from runtime.core import cgroups, config

    if not paths.placed_on_hosts.exists():
        return
    with contextlib.suppress(OSError):
        reaper = subprocess.Popen(
            [sys.executable, "-m", "actors", "host", "reap", f"run:{paths.run_id}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, config.HOME.name: str(root.path)},
        )
        cgroups.release(reaper.pid)  # folded by another run's guardian: not that run's

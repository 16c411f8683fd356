"""The reconciler: finish what dead runners could not, deliver what is still owed.

For each run whose runner is gone without a result and without a stop request: stop the
survivors of its session that are proven to be the run's now (runtime.core.members: their
environment carries the run's instance and state directory; the dead runner's recorded
session id alone proves nothing), publish `exited` once, and follow up. For each terminal
run without a follow-up marker: follow up (deduplicated by delivery id). Then retry due
deliveries of every session. Safe to run from any number of processes at once.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from runtime.core.errors import ActorsError
from runtime.core.ids import now_iso
from runtime.core.members import kill_orphans, run_marks
from runtime.core.process import is_gone, verify
from runtime.runs.events import record_event, write_progress
from runtime.runs.index import list_runs
from runtime.runs.status import TERMINAL, load_run, runner_identity
from runtime.store import safe
from runtime.store.layout import StateRoot
from runtime.store.writes import publish_json_once, temp_writer


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
    """Stop what the dead runner left behind: only members proven to be this run's."""
    sid = identity.get("sid") or identity.get("pid")
    ticks = identity.get("start_ticks")
    return kill_orphans(
        sid if isinstance(sid, int) else None,
        run_marks(str(run.get("run_instance_id")), str(run_dir)),
        since_ticks=ticks if isinstance(ticks, int) else None,
        boot=identity.get("boot_id") if isinstance(identity.get("boot_id"), str) else None,
    )


def reconcile(root: StateRoot, *, deliver: bool = True) -> dict[str, Any]:
    from runtime.delivery.followups import follow_up_terminal

    report: dict[str, Any] = {"exited": [], "followed_up": [], "retried": 0}
    for summary in list_runs(root):
        status = summary.get("status")
        if status not in TERMINAL:
            continue
        paths = root.run(summary["run"])
        try:
            run = load_run(paths)
        except Exception:
            continue
        if status == "exited" and not paths.result.exists():
            identity = runner_identity(paths, run)
            verdict, reason = verify(identity) if identity else ("unverifiable", "no identity")
            if verdict == "dead" and identity is not None:
                _kill_orphans(paths.dir, run, identity)
            instance = run["run_instance_id"]
            result = {
                "run": run["run"],
                "run_instance_id": instance,
                "status": "exited",
                "code": None,
                "killed": False,
                "degraded": False,
                "reason": f"runner gone without a result ({reason})",
                "ended_at": now_iso(),
            }
            if publish_json_once(paths.result, result):
                write_progress(paths.progress, instance, phase="exited", active=0)
                record_event(
                    paths.events, instance, "run.exited", fsync=True, reason=result["reason"]
                )
                report["exited"].append(run["run"])
        owed = paths.result.exists() and not paths.followup.exists()
        if owed:
            _sweep_dead_writers(paths.dir)
        try:
            if deliver and owed and follow_up_terminal(root, paths, run) is not None:
                report["followed_up"].append(run["run"])
        except Exception as exc:  # one bad run or session must not stop the others
            report.setdefault("errors", []).append(f"{run['run']}: {type(exc).__name__}: {exc}")
    if deliver:
        from runtime.delivery.engine import process_all  # deferred for start-up cost

        report["retried"] = process_all(root)
    return report

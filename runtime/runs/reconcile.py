"""The reconciler: fold every run whose runner is gone, then deliver what is still owed.

Each run is folded by runtime.runner.fold (the same fold the guardians make the moment
a runner dies); then due deliveries of every session are retried. Safe to run from any
number of processes at once.
"""

from __future__ import annotations

from typing import Any

from runtime.runner.fold import fold_run
from runtime.store.layout import StateRoot
from runtime.views.index import list_runs
from runtime.views.status import TERMINAL


def reconcile(root: StateRoot, *, deliver: bool = True) -> dict[str, Any]:
    report: dict[str, Any] = {"exited": [], "followed_up": [], "retried": 0}
    for summary in list_runs(root):
        if summary.get("status") not in TERMINAL:
            continue
        paths = root.run(summary["run"])
        try:
            folded = fold_run(root, paths, deliver=deliver)
        except Exception as exc:  # one bad run or session must not stop the others
            report.setdefault("errors", []).append(f"{paths.run_id}: {type(exc).__name__}: {exc}")
            continue
        for key in ("exited", "followed_up"):
            if folded[key]:
                report[key].append(paths.run_id)
    if deliver:
        from runtime.delivery.engine import process_all  # deferred for start-up cost

        report["retried"] = process_all(root)
    return report

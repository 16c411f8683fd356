"""Rows for docs/reliability.md, recorded by the reliability tests as they run.

A test calls `record(suite, fault, trials, observed)` after its assertions passed (so a
row only ever describes a passing trial set). Rows go to the JSONL file named by
ACTORS_RELIABILITY_REPORT when it is set (scripts/reliability_report.py sets it, runs the
suites, and renders the table); otherwise recording is a no-op.
"""

from __future__ import annotations

import json
import os
import time


def record(suite: str, fault: str, trials: int, observed: str) -> None:
    target = os.environ.get("ACTORS_RELIABILITY_REPORT")
    if not target:
        return
    row = {
        "suite": suite,
        "fault": fault,
        "trials": trials,
        "observed": observed,
        "ts": time.time(),
    }
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")

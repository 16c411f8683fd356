"""A runner parked by an older actors resumes under a newer one (an upgrade while a run
idled): its image kept bare counters (`counts`), not the steps of runtime.views.counts,
and the steps are folded from the run's journal instead of failing the resume."""

from __future__ import annotations

import json
from typing import Any

import actors
from runtime.runner.context import RunContext
from runtime.store.layout import StateRoot
from runtime.views.counts import journal_counts
from tests.conftest import finished


def test_a_context_saved_with_the_old_counters_restores_from_the_journal(
    home: StateRoot,
) -> None:
    run = finished(dict(actors.spawn(template="sh -c 'exit 3'")))
    assert run["status"] == "failed"
    paths = home.run(run["run"])
    record = json.loads(paths.run_json.read_text())
    ctx = RunContext(
        paths=paths,
        instance=record["run_instance_id"],
        values={},
        env={},
        cwd=record["cwd"],
        secrets=[],
        grace=1.0,
    )
    old: dict[str, Any] = {
        "counts": [0, 0, 1, 1],  # active, completed, failed, commands: the old image's
        "branches": {},
        "nodes": {},
        "failures": [],
        "failed_commands": [],
        "stop_reason": None,
        "abort": None,
        "grace": 1.0,
        "logs": {},
    }
    ctx.restore(old)
    counts = ctx.steps.counts()
    assert (counts["failed"], counts["attempts"]) == (1, 1), counts
    assert counts == journal_counts(paths, record["run_instance_id"])
    assert ctx.snapshot()["commands"] == 1

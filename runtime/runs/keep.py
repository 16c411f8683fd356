"""Keeping what worked: the recipe of a successful inline-template or ad-hoc-file run,
for `actors tools register NAME --from-run RUN`.

The run's follow-up only offers this (a question for the operator); nothing is saved
unless someone types the command. The recipe is the one the run was given (recorded in
run.json at spawn as `recipe_raw`), with the values its caller set baked in as
`defaults`, so `actors run NAME` repeats what worked and each value can still be
overridden. Secret values are never written: a secret the run was given stays a
parameter the next call has to pass.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.compiler.redact import is_secret_name
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot, parse_run_ref
from runtime.store.writes import dump_json
from runtime.views.status import derive, find_run


def recipe_from_run(root: StateRoot, ref: str) -> tuple[bytes, str]:
    """(the recipe's JSON bytes, a label naming the run); BadInput for a run that did not
    succeed or whose recipe is already a tool or cannot live elsewhere."""
    paths, run = find_run(root, parse_run_ref(ref))
    run_id = paths.run_id
    summary = derive(paths, run)
    if summary["status"] != "done" or summary.get("degraded"):
        state = summary["status"] + (" (degraded)" if summary.get("degraded") else "")
        raise BadInput(
            f"run {run_id} is {state}; only a run that succeeded can be kept as a recipe",
            hint="fix it and run it again, then keep that run",
        )
    raw = run.get("recipe_raw")
    if run.get("origin") not in ("template", "file") or not isinstance(raw, dict):
        name = run.get("recipe") or "its recipe"
        raise BadInput(
            f"run {run_id} ran the recipe {name}, which is already a tool",
            hint=f"call it again with: actors run {name}",
        )
    if raw.get("imports") or "recipe_dir" in json.dumps(raw):
        raise BadInput(
            f"run {run_id}'s recipe refers to files next to it ({{recipe_dir}} or imports)",
            hint=f"register the file itself: actors tools register NAME --from {run.get('recipe_file')}",
        )
    secret = set(run.get("secret_names") or [])
    values: dict[str, Any] = run.get("values") or {}
    given = {
        name: values[name]
        for name in run.get("given_values") or []
        if name in values and name not in secret and not is_secret_name(name)
    }
    recipe = dict(raw)
    if given:
        recipe["defaults"] = {**(raw.get("defaults") or {}), **given}
    return dump_json(recipe), f"run:{run_id}"

"""`actors restart RUN`: start a finished run again, with the same recipe and values.

The new run is an ordinary spawn (so the recipe is compiled and prechecked again, and
nothing is written if that fails): the recipe as the old run named it (the library name,
the file, or the inline template kept in its run.json), the values its caller gave (the
recipe's defaults are read again), its secrets' names, its directory and its group.
Its dependencies (`--after`) are not carried over: they were settled for the old run.
The new id is the first run's with `-2`, `-3`, ... (or `--as`); `restart_of` names the
first run (a restart of a restart counts on from it).
"""

from __future__ import annotations

from pathlib import Path

from runtime.core.errors import BadInput, Conflict
from runtime.runs.ownership import check_control, current_principal
from runtime.runs.spawn import SpawnRequest, spawn
from runtime.store.layout import StateRoot
from runtime.store.records import RunRecord
from runtime.views.status import TERMINAL, derive, find_run

MAX_RESTARTS = 999


def restart(
    root: StateRoot,
    ref: str,
    *,
    run_id: str | None = None,
    session: str | None = None,
    force: bool = False,
) -> RunRecord:
    """The record of the new run (its runner is already started)."""
    paths, old = find_run(root, ref)
    principal = current_principal(root, session)
    check_control(old, principal, force=force, action="restart", root=root)
    status = derive(paths, old)["status"]
    if status not in TERMINAL:
        raise Conflict(
            f"run {old['run']} is {status}; only a finished run can be restarted",
            hint=f"stop it first: actors cancel {old['run']}",
        )
    request = _request_for(old)
    request.run_id = run_id or _next_id(root, old)
    request.session = session
    return spawn(request, root)


def _request_for(old: RunRecord) -> SpawnRequest:
    values = old.get("values")
    values = values if isinstance(values, dict) else {}
    names = old.get("given_values")
    names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    given = {name: values[name] for name in names if name in values}
    recipe, template = None, None
    raw = old.get("recipe_raw")
    if old.get("origin") == "template" and isinstance(raw, dict):
        template = raw.get("template")
        if not isinstance(template, str):
            raise BadInput(f"run {old['run']}: its inline template cannot be read back")
    else:
        recorded = old.get("recipe_file")
        if isinstance(recorded, str) and Path(recorded).is_file():
            recipe = recorded
        else:
            recipe = old.get("recipe")
        if not recipe:
            raise BadInput(
                f"run {old['run']} names no recipe to start again",
                hint="spawn it anew with `actors spawn`",
            )
    group = old.get("group")
    secrets = old.get("secret_names")
    secrets = [s for s in secrets if isinstance(s, str)] if isinstance(secrets, list) else []
    return SpawnRequest(
        recipe=recipe,
        template=template,
        values=given,
        secret_names=secrets,
        group=group if isinstance(group, str) else None,
        cwd=old["cwd"] if isinstance(old.get("cwd"), str) else None,
        restart_of=_first(old),
    )


def _first(old: RunRecord) -> str:
    first = old.get("restart_of")
    return first if isinstance(first, str) and first else old["run"]


def _next_id(root: StateRoot, old: RunRecord) -> str:
    """`<first run>-<n>`: the first free n from 2 (a restart of a restart counts on)."""
    base = _first(old)
    for n in range(2, MAX_RESTARTS + 1):
        candidate = f"{base}-{n}"
        if not root.run(candidate).dir.exists():
            return candidate
    raise Conflict(f"run {base} was restarted {MAX_RESTARTS} times", hint="use --as ID")

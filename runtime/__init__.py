"""The actors runtime: state files, the runner process, process control, status.

Layering: `files`, `paths`, `ids`, `errors` are the primitives; `recipes` /
`recipe_model` / `placeholders` turn recipes into executable trees; `spawn`, `runner`,
`executor` start and execute runs; `status`, `control`, `index`, `retention`, `waiting`
observe and act on them. Only `executor` and `runner` import trio and only
`recipe_model` imports pydantic, so the CLI stays fast. Names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_getattr

_EXPORTS = {
    "ActorsError": "runtime.errors",
    "BadInput": "runtime.errors",
    "Conflict": "runtime.errors",
    "NotFound": "runtime.errors",
    "Refused": "runtime.errors",
    "StateDamaged": "runtime.errors",
    "StateRoot": "runtime.paths",
    "RunPaths": "runtime.paths",
    "parse_run_ref": "runtime.paths",
    "SpawnRequest": "runtime.spawn",
    "spawn": "runtime.spawn",
    "derive": "runtime.status",
    "status_of": "runtime.status",
    "list_runs": "runtime.index",
    "cancel": "runtime.control",
    "kill": "runtime.control",
    "wait_for": "runtime.waiting",
    "current_principal": "runtime.ownership",
    "Principal": "runtime.ownership",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from runtime.control import cancel as cancel, kill as kill
    from runtime.errors import (
        ActorsError as ActorsError,
        BadInput as BadInput,
        Conflict as Conflict,
        NotFound as NotFound,
        Refused as Refused,
        StateDamaged as StateDamaged,
    )
    from runtime.index import list_runs as list_runs
    from runtime.ownership import Principal as Principal, current_principal as current_principal
    from runtime.paths import (
        RunPaths as RunPaths,
        StateRoot as StateRoot,
        parse_run_ref as parse_run_ref,
    )
    from runtime.spawn import SpawnRequest as SpawnRequest, spawn as spawn
    from runtime.status import derive as derive, status_of as status_of
    from runtime.waiting import wait_for as wait_for


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())

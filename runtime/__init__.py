"""The actors runtime, in rooms by concern, each importing only the rooms below it:

    routing     a message to any address, the in-run side, inspect
    runs        spawn, runner, executor, status, control, ownership, index, retention
    delivery    follow-ups, sessions, the delivery engine, adapter contract and registry
    messaging   addresses, envelopes, mailboxes          compiler  recipes, values, tools
    store       the state root's layout, atomic files, journals
    core        errors, configuration, ids, process identity, fault points

`make check` enforces the order with import-linter (see docs/architecture.md). Only the
runner and executor import trio and only the recipe model imports pydantic, so the CLI
stays fast. The names below are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.core.lazy import lazy_getattr

_EXPORTS = {
    "ActorsError": "runtime.core.errors",
    "BadInput": "runtime.core.errors",
    "Conflict": "runtime.core.errors",
    "NotFound": "runtime.core.errors",
    "Refused": "runtime.core.errors",
    "StateDamaged": "runtime.core.errors",
    "StateRoot": "runtime.store.layout",
    "RunPaths": "runtime.store.layout",
    "parse_run_ref": "runtime.store.layout",
    "SpawnRequest": "runtime.runs.spawn",
    "spawn": "runtime.runs.spawn",
    "derive": "runtime.views.status",
    "status_of": "runtime.views.status",
    "list_runs": "runtime.views.index",
    "cancel": "runtime.runs.control",
    "kill": "runtime.runs.control",
    "wait_for": "runtime.views.waiting",
    "current_principal": "runtime.runs.ownership",
    "Principal": "runtime.runs.ownership",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from runtime.core.errors import (
        ActorsError as ActorsError,
        BadInput as BadInput,
        Conflict as Conflict,
        NotFound as NotFound,
        Refused as Refused,
        StateDamaged as StateDamaged,
    )
    from runtime.runs.control import cancel as cancel, kill as kill
    from runtime.runs.ownership import (
        Principal as Principal,
        current_principal as current_principal,
    )
    from runtime.runs.spawn import SpawnRequest as SpawnRequest, spawn as spawn
    from runtime.store.layout import (
        RunPaths as RunPaths,
        StateRoot as StateRoot,
        parse_run_ref as parse_run_ref,
    )
    from runtime.views.index import list_runs as list_runs
    from runtime.views.status import derive as derive, status_of as status_of
    from runtime.views.waiting import wait_for as wait_for


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())

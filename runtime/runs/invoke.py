"""Calling a tool: a recipe by name, its values checked against its parameters, spawned.

Used by `actors run` (in the foreground), by `tool:NAME` messages and by the MCP server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runtime.compiler.params import bind_values
from runtime.compiler.tools import load_tool
from runtime.runs.spawn import SpawnRequest, spawn
from runtime.store.layout import StateRoot

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


def invoke_tool(
    name: str,
    values: Mapping[str, Any],
    *,
    session: str | None = None,
    run_id: str | None = None,
    root: Any = None,
) -> RunRecord:
    """Spawn the tool NAME with JSON values (a `tool:NAME` message body), after checking
    them against its parameters. Returns the run record (the run is always detached)."""
    state = root or StateRoot.from_env()
    tool = load_tool(name, state)
    bound = bind_values(name, tool.params, {k: [v] for k, v in values.items()}, prefix="")
    return spawn(
        SpawnRequest(recipe=name, values=bound, session=session, run_id=run_id), root=state
    )

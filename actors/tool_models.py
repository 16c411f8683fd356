"""Parameter models of the coordinator tools (MCP), named as in pi-actors.

Each model validates one tool call, which the server then hands to the actors.api
function of the same verb (TOOLS names it), so the MCP server, the Python API and the
CLI share one behaviour; the JSON schemas the server publishes are these models'
schemas. tests/actors/test_command_table.py holds each model's fields to its API
function's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class _Params(BaseModel):
    """Strict: a value of another JSON type is refused, never coerced (`lines: true` is
    not 1, `update: "no"` not False, `as: 7` not "7"): a model's slip is told to it in
    one line instead of acted on as something it did not write."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class SpawnParams(_Params):
    """Start a detached run actor from a recipe (name or file) or an inline template."""

    as_: str | None = Field(None, alias="as", description="run:ID to use (default: generated)")
    recipe: str | None = Field(None, description="recipe name, e.g. hello")
    file: str | None = Field(None, description="path of a recipe JSON file")
    template: str | None = Field(None, description="inline command template (no shell)")
    values: dict[str, JsonValue] = Field(default_factory=dict, description="template values")
    group: str | None = Field(
        None, description="start when this group has a free slot (queued till then)"
    )
    after: list[str] = Field(
        default_factory=list, description="runs that must end done first (else: skipped)"
    )


class RestartParams(_Params):
    """Start a finished run again: same recipe, values and group, as a new run."""

    run: str = Field(description="run:ID of a finished run")
    as_: str | None = Field(None, alias="as", description="run:ID to use (default: <run>-2)")


class MessageParams(_Params):
    """Send one typed message to run:, branch:, room: or tool: (control.* to stop/kill)."""

    to: str = Field(description="run:ID, branch:RUN/B, room:RUN or tool:NAME")
    type: str = Field(description="dotted type, e.g. player.next or control.stop")
    body: JsonValue = Field(None, description="any JSON")
    summary: str | None = None
    reply_to: str | None = None


class ResultParams(_Params):
    """A finished run's result: status, code, its own result line, failure, artifacts."""

    run: str = Field(description="run:ID of a finished run (what a follow-up's `next` names)")


class StatusParams(_Params):
    """A run's status and step counters (what a `command.done` follow-up's `next` names)."""

    run: str = Field(description="run:ID")


class ToolsRegisterParams(_Params):
    """Keep what worked, once the operator agreed: a successful ad-hoc run's recipe as a
    tool (what a follow-up's `keep` offer names). Never replaces a tool unless `update`."""

    name: str = Field(description="the tool's name, e.g. git-log")
    from_run: str = Field(description="run:ID of a successful spawn -t or ad-hoc file run")
    update: bool = Field(False, description="replace an existing tool of that name")


class InspectParams(_Params):
    """Read a run, branch, room or session on purpose (only when a follow-up asks for it)."""

    target: str = Field(description="run:ID, branch:RUN/B, room:RUN, session:ID or session:all")
    view: Literal[
        "status",
        "tail",
        "messages",
        "artifacts",
        "files",
        "mailbox",
        "communication",
        "roster",
        "tasks",
        "runs",
    ] = "status"
    lines: int = Field(40, ge=0, le=2000)
    status: str = Field("all", description="session filter: all, active, running, terminal, ...")
    verbose: bool = Field(False, description="every field, indented (default: compact)")


class InboxReadParams(_Params):
    """Read (and mark read) every unread follow-up delivered to this coordinator session."""

    peek: bool = Field(False, description="show without marking read")
    bodies: bool = Field(False, description="include each follow-up's full body")


class RecipesParams(_Params):
    """List the recipes `spawn` can start (project, user and shipped)."""


class Tool(NamedTuple):
    """One coordinator tool: its parameters and the actors.api function it calls."""

    model: type[_Params]
    api: str | None
    """The actors.api function (None: the tool reads this session's state, MCP only)."""
    renames: Mapping[str, str] = {}
    """Model field -> that function's parameter, where the names differ."""
    presentation: tuple[str, ...] = ()
    """Fields that only shape what the model is shown (not passed to the function)."""
    read_only: bool = False
    """Changes nothing (MCP `readOnlyHint`: a harness need not ask before calling it)."""


TOOLS: dict[str, Tool] = {
    "spawn": Tool(SpawnParams, "spawn", {"file": "recipe"}),
    "restart": Tool(RestartParams, "restart"),
    "message": Tool(MessageParams, "message"),
    "result": Tool(ResultParams, "result", read_only=True),
    "status": Tool(StatusParams, "status", read_only=True),
    "tools_register": Tool(ToolsRegisterParams, None),
    "inspect": Tool(InspectParams, "inspect", presentation=("verbose",), read_only=True),
    "inbox_read": Tool(InboxReadParams, None),
    "recipes": Tool(RecipesParams, None, read_only=True),
}

TOOL_MODELS: dict[str, type[_Params]] = {name: tool.model for name, tool in TOOLS.items()}


def schema(model: type[_Params]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True)

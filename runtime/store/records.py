"""The shapes of a run's state files, as their writers write them (docs/state-files.md).

TypedDicts, not classes: the files are read and written as plain JSON objects by every
layer (spawn and the runner write them, status, index, routing and the API read them),
and a TypedDict is a dict at run time, so naming a shape changes no behaviour and costs
no conversion. They live in the store because every layer above reads these files.

Modules on the CLI's hot paths import these names only under `TYPE_CHECKING` (and cast
with the name as a string), so typing them costs no start-up time. Values that really
are arbitrary JSON (recipe values, the compiled template, artifact specs) stay `Any`.
"""

from __future__ import annotations

from typing import Any, NotRequired, Required, TypedDict


class MailboxSpec(TypedDict, total=False):
    """run.json `mailbox`: the recipe's declared message types and its endpoint."""

    accepts: list[str | dict[str, Any]]
    """`{"type": ...}` objects as the compiler writes them (plain type names are read too)."""
    emits: list[str | dict[str, Any]]
    endpoint: str
    """`mailbox` or `fifo`."""


RunRecord = TypedDict(
    "RunRecord",
    {
        "schema": str,
        "run": str,
        "run_instance_id": str,
        "address": str,
        "state_dir": str,
        "created_at": str,
        "cwd": str,
        "owner_id": str,
        "owner_user": str,
        "parent": str | None,
        "launch_source": str,
        "recipe": str | None,
        "recipe_file": str | None,
        "recipe_dir": str | None,
        "description": str | None,
        "async": bool,
        "template": dict[str, Any],
        "values": dict[str, Any],
        "secret_names": list[str],
        "artifacts": dict[str, Any],
        "mailbox": MailboxSpec,
        "retire_when": str | None,
        "pid": int | None,
        "argv": list[str] | None,
        "process_identity": dict[str, Any] | None,
        "cgroup": NotRequired[str | None],
        "tool": NotRequired[str | None],
        "waiter": NotRequired[dict[str, Any] | None],
        "origin": NotRequired[str],
        "recipe_raw": NotRequired[dict[str, Any] | None],
        "given_values": NotRequired[list[str]],
        "group": NotRequired[str | None],
        "after": NotRequired[list[str]],
        "queue_order": NotRequired[str],
        "restart_of": NotRequired[str],
    },
)
"""run.json, written by spawn (`_run_record`; `pid`, `argv`, `process_identity` filled in
once the runner is started). Functional syntax because `async` is a keyword. `tool` is
read (status, index) but no current writer sets it: runs of older versions had it.
`cgroup`: the cgroup v2 directory the runner moves into (runtime.core.cgroups), None where
none can be made.
`waiter`: the process identity of a caller that blocks on the result (`spawn --wait`,
a foreground `actors run`); while it is alive at the run's end, no follow-up is owed.
`origin`: `library` (a recipe found by name or in a recipe root), `file` (an ad-hoc
recipe file) or `template` (`spawn -t`); `recipe_raw` (the recipe as given) and
`given_values` (the names the caller set, kept for every run: `actors restart` gives them
again) are kept for the last two, so `actors tools register NAME --from-run RUN` can keep
what worked.
`group`, `after`, `queue_order`: a run that waits before its graph starts
(runtime.runner.gate): its group, the runs that must end `done` first, and its place in
the group's queue (a time-ordered id taken at spawn). `restart_of`: the run that
`actors restart` started again."""


class NodeRecord(TypedDict):
    """One finished node in result.json `nodes`."""

    id: str
    label: str | None
    kind: str
    status: str
    code: int
    attempts: int
    degraded: bool
    reason: str | None


class FailureRecord(TypedDict):
    """One failed node in result.json `failures`, with the policy that applied."""

    node: str
    label: str | None
    code: int
    status: str
    policy: str | None
    reason: str | None
    command: NotRequired[str]
    """The failed command line (secrets masked, cut to a preview) of a leaf's failure."""
    exit_code: NotRequired[int]
    stderr_tail: NotRequired[str]
    """Its stderr's last lines (at most 10 lines / 2 KB; run-written text, not inert)."""
    stderr_cut: NotRequired[bool]
    stderr_file: NotRequired[str]


class StopRecord(TypedDict):
    """Who stopped a run: stop.json's `by` and `forced` (`cancel` / `kill`), or the sender
    of the `control.stop` / `control.kill` the runner acted on. result.json keeps it as
    `stopped`, so the follow-up reads who stopped the run from the outcome published."""

    by: str
    forced: bool
    """Only `--force` allowed it: the run is another session's, whose owner is told."""


class ResultRecord(TypedDict, total=False):
    """result.json, published once: by the runner (every key), by its crash path, or by
    `cancel` / `kill` when the runner died first (the short record)."""

    run: Required[str]
    run_instance_id: Required[str]
    status: Required[str]
    code: Required[int]
    degraded: Required[bool]
    killed: Required[bool]
    ended_at: Required[str]
    reason: str | None
    created_at: str | None
    started_at: str | None
    duration_ms: int
    retired: bool
    stopped: StopRecord
    """A cancelled or killed run: who stopped it, when known."""
    output_file: str | None
    output: str | None
    artifacts: dict[str, Any]
    nodes: list[NodeRecord]
    failures: list[FailureRecord]
    failure: FailureRecord
    """The failure that decided a failed (or degraded) run, as reports show it first."""
    completed: int
    failed: int
    timed_out: int
    cancelled: int
    attempts: int
    retries: int
    """The step counters runtime.views.counts defines, as the run ended."""


class ProgressRecord(TypedDict, total=False):
    """progress.json: live counters (`branches` maps parallel children's labels to their
    status). `read_progress` drops the counters it finds damaged, hence total=False."""

    run_instance_id: str
    updated_at: str
    phase: str
    active: int
    completed: int
    failed: int
    timed_out: int
    cancelled: int
    attempts: int
    retries: int
    """The counters runtime.views.counts defines (a step, an attempt, a retry)."""
    degraded: bool
    branches: dict[str, str]
    waiting_for: str
    """While `phase` is `queued`: what the run waits for (runtime.runner.gate)."""
    damaged: str
    """Never in the file: what `read_progress` found wrong with it, for the views."""


class RunStatus(TypedDict, total=False):
    """A run's derived status (`derive`), plus progress counters (`full_status`). Never
    stored: status is derived on every read (docs/state-files.md, *How status is derived*)."""

    run: Required[str]
    address: Required[str]
    state_dir: Required[str]
    recipe: Required[str | None]
    tool: Required[str | None]
    command: Required[str | None]
    owner_id: Required[str | None]
    parent: Required[str | None]
    created_at: Required[str | None]
    pid: Required[int | None]
    code: Required[int | None]
    degraded: Required[bool]
    ended_at: Required[str | None]
    status: str
    reason: str | None
    from_result: bool
    proven: bool
    """The status is what events.jsonl proves (the runner died before result.json)."""
    process: str
    damaged: str
    damaged_file: str
    """The damaged file, relative to the run's directory (with `damaged`)."""
    phase: str
    started_at: str | None
    duration_ms: int | None
    active: int
    completed: int | None
    failed: int | None
    timed_out: int | None
    cancelled: int | None
    attempts: int | None
    retries: int | None
    branches: dict[str, str]
    waiting_for: str
    """A queued run's wait: `run X` or `a slot of group G (n ahead)`."""


class ListedRun(TypedDict):
    """One run as `actors ls` lists it: the keys of `runtime.views.index.LISTED`, in that
    order, whether it came from index.json or was derived live."""

    run: str
    address: str
    state_dir: str
    created_at: str | None
    recipe: str | None
    tool: str | None
    command: str | None
    owner_id: str | None
    parent: str | None
    pid: int | None
    status: str | None
    code: int | None
    degraded: bool | None
    ended_at: str | None
    reason: str | None
    started_at: str | None
    duration_ms: int | None
    completed: int | None
    failed: int | None
    timed_out: int | None
    cancelled: int | None
    attempts: int | None
    retries: int | None
    """From result.json once the run has one (runtime.views.counts); None before."""
    damaged: NotRequired[str]
    damaged_file: NotRequired[str]


__all__ = [
    "FailureRecord",
    "ListedRun",
    "MailboxSpec",
    "NodeRecord",
    "ProgressRecord",
    "ResultRecord",
    "RunRecord",
    "RunStatus",
]

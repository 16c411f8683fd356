"""Everything a page shows about one run, read in one call and masked once.

The views are `inspect`'s (tail, messages, mailbox, artifacts), plus the lifecycle
journal and result.json with its `failure` (the failing command and its stderr's last
lines), so the page and `actors inspect` / `actors result` read the same files the same
way. Child runs are left to the caller, which keeps a listing already (inspect's status
view lists every run of the root to find them).
"""

from __future__ import annotations

from typing import Any, TypedDict

from runtime.compiler.redact import redact_deep, redact_values, run_secrets
from runtime.core.errors import StateDamaged
from runtime.store.layout import StateRoot
from runtime.store.reads import tail_jsonl
from runtime.views.inspect import inspect
from runtime.views.status import find_run, full_status, read_result

TAIL_LINES = 200
EVENTS = 200


class RunPage(TypedDict):
    status: dict[str, Any]
    values: dict[str, Any]
    stdout: list[str]
    stderr: list[str]
    events: list[dict[str, Any]]
    inbox: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    artifacts: dict[str, Any]
    result: dict[str, Any] | None
    result_problem: str | None
    has_room: bool


def run_page(root: StateRoot, run_id: str, *, lines: int = TAIL_LINES) -> RunPage:
    """One run's page; every text in it masked of the run's secrets."""
    paths, run = find_run(root, run_id)
    target = f"run:{run_id}"
    tail = inspect(root, target, "tail", lines=lines)
    result: Any = None
    problem = None
    try:
        result = read_result(paths)
    except StateDamaged as exc:
        problem = exc.message
    page: dict[str, Any] = {
        "status": dict(full_status(paths, run)),
        "values": redact_values(run.get("values") or {}, run.get("secret_names", [])),
        "stdout": tail["stdout"],
        "stderr": inspect(root, target, "tail", lines=min(lines, 50))["stderr"],
        "events": tail_jsonl(paths.events, EVENTS),
        "inbox": inspect(root, target, "mailbox", lines=lines)["entries"],
        "outbox": inspect(root, target, "messages", lines=lines)["messages"],
        "artifacts": inspect(root, target, "artifacts")["artifacts"],
        "result": result,
        "result_problem": problem,
        "has_room": paths.room_timeline.exists(),
    }
    masked: RunPage = redact_deep(page, run_secrets(run))
    return masked

"""A swarm's tasks, one row each: the table `actors result`, `inspect room:RUN --view
tasks` (so the MCP `inspect` tool) and the dashboard's room page all show.

A swarm's workers (the backlog-implementers recipe's branches, or any recipe that
follows its protocol) post `task.claim` and `task.result` to `room:<run>`, and the
worker that drains the swarm posts `swarm.drained`. The rows fold those messages: each
claim with the result that answered it (by task number and worker), `working` while
none has, `interrupted` once the run ended without one (a stopped or killed swarm).
The fold is pure: its callers read the room (bounded, masked) and pass its messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

TASK_TYPES = ("task.claim", "task.result", "swarm.drained")
"""The room messages the table is folded from."""
ITEM_CHARS = 200
REASON_CHARS = 300


class TaskRow(TypedDict):
    task: int | None
    worker: str
    item: str | None
    index: int | None
    state: str
    """`working`, `done`, `failed` or `interrupted`."""
    commit: str | None
    reason: str | None
    claimed_at: str | None
    settled_at: str | None


class Drained(TypedDict):
    at: str | None
    summary: str | None
    done: int | None
    failed: int | None


class SwarmTasks(TypedDict):
    tasks: list[TaskRow]
    counts: dict[str, int]
    drained: Drained | None
    """The last `swarm.drained` of the room, None while the swarm has not drained."""


def is_swarm(run: Mapping[str, Any]) -> bool:
    """A run that declares the swarm protocol (it emits `task.claim`)."""
    emits = (run.get("mailbox") or {}).get("emits") or []
    return any((e.get("type") if isinstance(e, dict) else e) == "task.claim" for e in emits)


def swarm_tasks(messages: Iterable[Mapping[str, Any]], *, ended: bool = False) -> SwarmTasks:
    """The table of a room's messages (oldest first); `ended`: the run is over, so a
    claim nobody answered was interrupted."""
    rows: list[TaskRow] = []
    drained: Drained | None = None
    for message in messages:
        kind = message.get("type")
        raw = message.get("body")
        body: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        worker = _worker(message, body)
        if kind == "task.claim":
            rows.append(_claim(body, worker, message.get("ts")))
        elif kind == "task.result":
            _settle(rows, body, worker, message.get("ts"))
        elif kind == "swarm.drained":
            drained = {
                "at": _text(message.get("ts")),
                "summary": _text(message.get("summary")),
                "done": body.get("done") if isinstance(body.get("done"), int) else None,
                "failed": body.get("failed") if isinstance(body.get("failed"), int) else None,
            }
    rows.sort(key=lambda row: (row["task"] is None, row["task"] or 0))
    if ended:
        for row in rows:
            if row["state"] == "working":
                row["state"] = "interrupted"
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return {"tasks": rows, "counts": counts, "drained": drained}


def _worker(message: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    """The worker's name: its body's `worker`, else the sender's branch name."""
    named = body.get("worker")
    if isinstance(named, str) and named:
        return named
    return str(message.get("from") or "").rsplit("/", 1)[-1]


def _claim(body: Mapping[str, Any], worker: str, ts: Any) -> TaskRow:
    task = body.get("task")
    index = body.get("index")
    return {
        "task": task if isinstance(task, int) and not isinstance(task, bool) else None,
        "worker": worker,
        "item": _cut(body.get("item"), ITEM_CHARS),
        "index": index if isinstance(index, int) and not isinstance(index, bool) else None,
        "state": "working",
        "commit": None,
        "reason": None,
        "claimed_at": _text(ts),
        "settled_at": None,
    }


def _settle(rows: list[TaskRow], body: Mapping[str, Any], worker: str, ts: Any) -> None:
    """Settle the newest open claim of this worker the result answers (by task number);
    a result without one (a rejected assignment) answers no claim."""
    if body.get("task") is None:
        return
    for row in reversed(rows):
        if row["task"] == body.get("task") and row["worker"] == worker:
            if row["state"] != "working":
                return
            row["state"] = "done" if body.get("ok") else "failed"
            row["commit"] = _text(body.get("commit"))
            row["reason"] = _cut(body.get("reason") or body.get("error"), REASON_CHARS)
            row["settled_at"] = _text(ts)
            return


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _cut(value: Any, limit: int) -> str | None:
    text = _text(value)
    return text if text is None or len(text) <= limit else text[: limit - 1] + "…"

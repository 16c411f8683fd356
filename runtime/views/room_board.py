"""A swarm's room as a board: who claimed what, what came of it, how far each got.

A swarm's workers (the backlog-implementers recipe's branches, or any recipe that
follows its protocol) post `task.claim`, `task.result` and `task.awaiting` to
`room:<run>`. The board folds the room's timeline per sender: each claim with the result
that answered it (by task number), and the backlog left and idleness from the sender's
last `task.awaiting`. Senders that post other types show up as members with their last
word. The timeline is read through `inspect` (bounded, masked). The per-task table
beside it is the one `actors result` shows (runtime.views.swarm_tasks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from runtime.views.inspect import MAX_LINES, inspect
from runtime.views.swarm_tasks import Drained, TaskRow, swarm_tasks


class Claim(TypedDict):
    task: Any
    item: str | None
    index: int | None
    source: str | None
    claimed_at: str | None
    state: str
    """`working`, `done` or `failed`."""
    commit: str | None
    reason: str | None


class Worker(TypedDict):
    sender: str
    claims: list[Claim]
    done: int
    failed: int
    backlog_left: int | None
    idle: bool
    last_type: str | None
    last_at: str | None


class RoomBoard(TypedDict):
    run: str
    messages: int
    shown: list[dict[str, Any]]
    workers: list[Worker]
    tasks: list[TaskRow]
    drained: Drained | None


def _claim(body: Mapping[str, Any], ts: Any) -> Claim:
    return {
        "task": body.get("task"),
        "item": _text(body.get("item")),
        "index": body.get("index") if isinstance(body.get("index"), int) else None,
        "source": _text(body.get("source")),
        "claimed_at": _text(ts),
        "state": "working",
        "commit": None,
        "reason": None,
    }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def room_board(root: Any, run_id: str, *, shown: int = 200, ended: bool = False) -> RoomBoard:
    """The board of `room:<run_id>`, with its newest `shown` messages; `ended`: the run
    is over (a claim nobody answered was interrupted)."""
    data = inspect(root, f"room:{run_id}", "messages", lines=MAX_LINES)
    messages: list[dict[str, Any]] = data["messages"]
    workers: dict[str, Worker] = {}
    for m in messages:
        sender = str(m.get("from"))
        raw = m.get("body")
        body: dict[str, Any] = raw if isinstance(raw, dict) else {}
        w = workers.setdefault(
            sender,
            {
                "sender": sender,
                "claims": [],
                "done": 0,
                "failed": 0,
                "backlog_left": None,
                "idle": False,
                "last_type": None,
                "last_at": None,
            },
        )
        w["last_type"], w["last_at"] = _text(m.get("type")), _text(m.get("ts"))
        kind = m.get("type")
        if kind == "task.claim":
            w["claims"].append(_claim(body, m.get("ts")))
            w["idle"] = False
        elif kind == "task.result":
            _settle(w, body)
        elif kind == "task.awaiting":
            left = body.get("backlog_left")
            w["backlog_left"] = left if isinstance(left, int) else w["backlog_left"]
            w["idle"] = bool(body.get("idle"))
    table = swarm_tasks(messages, ended=ended)
    return {
        "run": run_id,
        "messages": len(messages),
        "shown": messages[-shown:],
        "workers": sorted(workers.values(), key=lambda w: w["sender"]),
        "tasks": table["tasks"],
        "drained": table["drained"],
    }


def _settle(worker: Worker, body: Mapping[str, Any]) -> None:
    """Mark the claim a result answers (by task number) done or failed."""
    ok = bool(body.get("ok"))
    worker["done" if ok else "failed"] += 1
    for claim in reversed(worker["claims"]):
        if claim["task"] == body.get("task") and claim["state"] == "working":
            claim["state"] = "done" if ok else "failed"
            claim["commit"] = _text(body.get("commit"))
            claim["reason"] = _text(body.get("reason") or body.get("error"))
            return

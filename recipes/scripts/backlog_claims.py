"""The backlog of the `backlog-implementers` recipe, and the run's shared claim table.

A sibling module of backlog_worker.py (imported from the script's own directory): every
worker of a run shares this table, so no two of them ever take the same item.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_CHECKBOX = re.compile(r"^\[([ xX])\]\s*")


def parse_backlog(text: str) -> list[str]:
    """One item per non-blank line; `#` lines are headings or comments.

    A leading list marker (`- `, `* `, `+ `, `1. `) and an open checkbox (`[ ]`) are
    stripped; a checked box (`- [x] done`) marks an item that is already done: skipped.
    """
    items = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = _LIST_MARKER.sub("", line, count=1)
        box = _CHECKBOX.match(line)
        if box:
            if box.group(1) in "xX":
                continue
            line = line[box.end() :]
        line = line.strip()
        if line:
            items.append(line)
    return items


@dataclass
class Task:
    """One unit of work for the agent."""

    number: int
    item: str
    index: int | None
    """1-based position in the backlog snapshot, None for an assignment outside it."""
    source: str
    """`backlog` (self-selected) or `assignment` (a task.assign)."""
    agent_cmd: list[str]
    validate_cmd: list[str]
    assignment_id: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    """The `agent_cmd` / `validate_cmd` a task.assign gave for this task only."""


@dataclass(frozen=True)
class Departure:
    """What leaving the swarm left to the worker that left (or that saw a peer go)."""

    left: bool
    """This call made the worker gone (False: it had left already)."""
    drained: bool
    """This departure drained the swarm: the leaver finishes it (as `Claims.idle` says)."""
    last: bool
    """Every worker of the roster has left: the leaver is the last one out."""
    finishing: bool
    """The swarm was finishing (drained, not kept alive) when the leaver left."""


class Claims:
    """The run's shared claim table: `<state_dir>/backlog/claims.json`, under an flock.

    The backlog file is read once, by the first claim of the run, into `items` (or the
    `items` value is taken as it is); every claim (self-selected or assigned) is appended
    to `claims` with its task number, and settled `done` or `failed` with its outcome.
    The same table holds the swarm's roster: each worker's state (`busy`, `idle` or
    `gone`) and the drains so far, so that exactly one worker sees the swarm drain
    (`idle`) and exactly one leaves it last (`leave`).
    """

    def __init__(
        self,
        state_dir: Path,
        backlog: Path | None,
        items: list[str],
        roster: list[str],
        *,
        self_select: bool = True,
        keep_alive: bool = False,
    ) -> None:
        self.dir = state_dir / "backlog"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "claims.json"
        self.lock = self.dir / ".claims.lock"
        self.backlog = backlog
        self.items = items
        self.roster = roster
        self.self_select = self_select
        self.keep_alive = keep_alive

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self.file.exists():
                state = json.loads(self.file.read_text(encoding="utf-8"))
            else:
                items = self.items
                if self.backlog is not None:
                    items = parse_backlog(self.backlog.read_text(encoding="utf-8"))
                backlog = None if self.backlog is None else str(self.backlog)
                state = {"backlog": backlog, "items": items, "claims": []}
            for key, empty in (("workers", {}), ("drains", []), ("finishing", False)):
                state.setdefault(key, empty)
            yield state
            tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(state, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.file)
        finally:
            os.close(fd)  # releases the flock

    @staticmethod
    def _open_indexes(state: dict[str, Any]) -> list[int]:
        taken = {c["index"] for c in state["claims"] if c.get("index") is not None}
        return [i for i in range(1, len(state["items"]) + 1) if i not in taken]

    @staticmethod
    def _record(
        state: dict[str, Any], worker: str, item: str, index: int | None, source: str
    ) -> int:
        number = len(state["claims"]) + 1
        state["claims"].append(
            {
                "task": number,
                "index": index,
                "item": item,
                "worker": worker,
                "source": source,
                "at": _now(),
                "state": "working",
            }
        )
        _set(state, worker, "busy")
        return number

    def claim_next(self, worker: str, end: str) -> tuple[int, int, str] | None:
        """Claim the first (top) or last (bottom) unclaimed item: (task, index, item)."""
        with self.locked() as state:
            open_ = self._open_indexes(state)
            if not open_:
                return None
            index = open_[0] if end == "top" else open_[-1]
            item = state["items"][index - 1]
            return self._record(state, worker, item, index, "backlog"), index, item

    def claim_assigned(self, worker: str, item: str) -> tuple[int, int | None]:
        """Record an assignment; an identical unclaimed backlog item is taken with it."""
        with self.locked() as state:
            index = next(
                (i for i in self._open_indexes(state) if state["items"][i - 1] == item), None
            )
            return self._record(state, worker, item, index, "assignment"), index

    def note(self, number: int, outcome: dict[str, Any]) -> None:
        """More about a claimed task: the commands it runs with, then its outcome
        (`state`: `done` / `failed`, and what came of it)."""
        with self.locked() as state:
            for claim in state["claims"]:
                if claim["task"] == number:
                    claim.update(outcome, settled=_now())

    def left(self) -> int:
        with self.locked() as state:
            return len(self._open_indexes(state))

    def snapshot(self) -> dict[str, Any]:
        """A copy of the whole table, read under the lock."""
        with self.locked() as state:
            copy: dict[str, Any] = json.loads(json.dumps(state))
            return copy

    # -- the roster and the finish line

    def join(self, worker: str, **details: Any) -> None:
        """The worker is in the swarm (busy until it first says it is idle)."""
        with self.locked() as state:
            _set(state, worker, "busy", **details)

    def idle(self, worker: str) -> bool:
        """The worker waits for work; True when that drained the swarm, once per drain:
        the caller then finishes it (or, kept alive, tells the coordinator)."""
        with self.locked() as state:
            _set(state, worker, "idle")
            return self._drain(state, worker)

    def finishing(self) -> bool:
        with self.locked() as state:
            return bool(state["finishing"])

    def leave(self, worker: str, error: str | None = None, *, may_drain: bool = True) -> Departure:
        """The worker is gone for good (finished, stopped or broken; or its process
        ended, as a peer saw). A worker that was stopped (`may_drain` False) never
        drains the swarm: a stop is not a finish."""
        with self.locked() as state:
            left = _state_of(state, worker) != "gone"
            _set(state, worker, "gone", error=error)
            drained = may_drain and self._drain(state, worker)
            last = all(_state_of(state, name) == "gone" for name in self.roster)
            return Departure(left, drained, last, bool(state["finishing"]))

    def peers(self, worker: str) -> dict[str, dict[str, Any]]:
        """The other workers still in the swarm, with what they recorded when joining."""
        with self.locked() as state:
            return {
                name: dict(info)
                for name, info in state["workers"].items()
                if name != worker and info.get("state") != "gone"
            }

    def _drain(self, state: dict[str, Any], worker: str) -> bool:
        """Whether the swarm has just drained: every worker idle (or gone), nothing
        unclaimed, and a task claimed since the last drain (or no drain yet); the drain
        is recorded, and a swarm not kept alive is finishing from then on."""
        if state["finishing"]:
            return False
        if any(_state_of(state, name) not in ("idle", "gone") for name in self.roster):
            return False
        if self._open_indexes(state):
            return False
        drains = state["drains"]
        if drains and drains[-1]["claims"] == len(state["claims"]):
            return False
        drains.append({"drain": len(drains) + 1, "at": _now(), "claims": len(state["claims"])})
        drains[-1]["by"] = worker
        state["finishing"] = not self.keep_alive
        return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _state_of(state: dict[str, Any], worker: str) -> str:
    """A worker that has not joined yet counts as busy: it may still claim."""
    return str(state["workers"].get(worker, {}).get("state", "busy"))


def _set(state: dict[str, Any], worker: str, now: str, **details: Any) -> None:
    entry = state["workers"].setdefault(worker, {})
    if entry.get("state") == "gone":
        return  # gone is for good
    entry.update(details, state=now, since=_now())

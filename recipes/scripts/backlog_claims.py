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
from dataclasses import dataclass
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


class Claims:
    """The run's shared claim table: `<state_dir>/backlog/claims.json`, under an flock.

    The backlog file is read once, by the first claim of the run, into `items`; every
    claim (self-selected or assigned) is appended to `claims` with its task number.
    """

    def __init__(self, state_dir: Path, backlog: Path) -> None:
        self.dir = state_dir / "backlog"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "claims.json"
        self.lock = self.dir / ".claims.lock"
        self.backlog = backlog

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self.file.exists():
                state = json.loads(self.file.read_text(encoding="utf-8"))
            else:
                text = self.backlog.read_text(encoding="utf-8")
                state = {"backlog": str(self.backlog), "items": parse_backlog(text), "claims": []}
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
                "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            }
        )
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

    def left(self) -> int:
        with self.locked() as state:
            return len(self._open_indexes(state))

"""The listing a long-lived viewer keeps of every run, refreshed one run at a time.

`actors ls` lists the runs from scratch on every call (runtime.views.index): cheap for a
command, wasteful for a page that redraws on every change. The board lists once, then
re-derives only the runs whose files a watcher saw change, so a change costs one run's
read however many runs the root holds, and a page of 10,000 runs is a slice of memory.
Active runs carry their progress counters (progress.json: steps active, branches), the
picture a viewer draws; a finished run needs none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NotRequired

from runtime.core.errors import ActorsError, ResourceError, resource_error
from runtime.store.layout import StateRoot
from runtime.store.records import ListedRun
from runtime.views.counts import COUNTS
from runtime.views.index import list_runs, listed_one
from runtime.views.status import ACTIVE, read_progress


class BoardRun(ListedRun):
    """A listed run, plus its progress counters while it is active (a finished run's
    are its result's, listed)."""

    phase: NotRequired[str]
    active: NotRequired[int]
    branches: NotRequired[dict[str, str]]


_PROGRESS = ("phase", *COUNTS, "branches")


class RunBoard:
    """Every run of one state root, newest first, kept fresh by `refresh(names)`."""

    def __init__(self, root: StateRoot) -> None:
        self.root = root
        self._runs: dict[str, BoardRun] = {}
        self._ordered: list[BoardRun] | None = None
        self.version = 0
        """Bumped on every change: a reader can tell whether it has seen the latest."""
        self.refused: dict[str, str] = {}
        """Run directories refused on a refresh (not trusted), with why: left off the
        board, where `actors ls` would refuse the whole listing."""
        self.behind: set[str] = set()
        """Runs a refresh could not read (the machine ran out of descriptors or memory):
        their rows stay as they were and are read again with the next refresh."""

    def load(self) -> None:
        """List every run afresh (at start; and when the watcher lost track)."""
        self._runs = {r["run"]: self._with_progress(r) for r in list_runs(self.root)}
        self._ordered = None
        self.version += 1

    def refresh(self, names: Iterable[str]) -> set[str]:
        """Re-derive the named runs (a run gone from disk leaves the board); returns the
        names whose row changed."""
        changed: set[str] = set()
        names = set(names) | self.behind
        self.behind = set()
        for name in names:
            try:
                listed = listed_one(self.root, name)
                row = None if listed is None else self._with_progress(listed)
            except (ResourceError, OSError) as exc:
                if not isinstance(exc, ResourceError) and resource_error(exc) is None:
                    raise
                self.behind.add(name)  # not the run's fault: keep its row, read it next time
                continue
            except ActorsError as exc:  # another user's directory, or one others can write
                self.refused[name] = exc.message
                row = None
            except Exception as exc:  # an unforeseen error in one run's files: left off
                self.refused[name] = f"run {name}: {type(exc).__name__}: {exc}"[:300]
                row = None
            if row != self._runs.get(name):
                changed.add(name)
                if row is None:
                    self._runs.pop(name, None)
                else:
                    self._runs[name] = row
        if changed:
            self._ordered = None
            self.version += 1
        return changed

    def runs(self) -> list[BoardRun]:
        """Every run, newest first (the order of `actors ls`)."""
        if self._ordered is None:
            self._ordered = sorted(
                self._runs.values(), key=lambda r: str(r.get("created_at") or ""), reverse=True
            )
        return self._ordered

    def get(self, name: str) -> BoardRun | None:
        return self._runs.get(name)

    def children(self, name: str) -> list[BoardRun]:
        parent = f"run:{name}"
        return [r for r in self.runs() if r.get("parent") == parent]

    def _with_progress(self, listed: ListedRun) -> BoardRun:
        row: BoardRun = {**listed}  # type: ignore[typeddict-item]
        if listed.get("status") in ACTIVE:
            progress = read_progress(self.root.run(listed["run"]))
            for key in _PROGRESS:
                if key in progress:
                    row[key] = progress[key]  # type: ignore[literal-required]
        return row

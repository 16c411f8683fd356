"""One page of the runs listing: filtered, grouped by owner session, nested as a tree.

A viewer of thousands of runs shows a page at a time. The page is cut from the top-level
runs (those whose parent run is not listed with them), newest first; each carries its
child runs nested beneath it, whatever page they would fall on, so a tree is never torn
across pages. Rows are grouped by the session that owns them, each group with the count
of active work units the status line draws as ▷ (`actors status --line`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from runtime.core.errors import BadInput
from runtime.views.counts import FINAL_COUNTS, counts_of
from runtime.views.status import ACTIVE, TERMINAL

PER_PAGE = 50
MAX_PER_PAGE = 500
STATUS_WORDS = (*ACTIVE, *TERMINAL, "damaged", "active", "terminal")


@dataclass(frozen=True)
class RunFilter:
    """What a viewer asked for: statuses (comma list, `active` and `terminal` included),
    an owner session, a text to find in a run's id, recipe, tool or command, a page."""

    status: str = ""
    session: str = ""
    text: str = ""
    page: int = 1
    per: int = PER_PAGE

    def statuses(self) -> set[str]:
        wanted: set[str] = set()
        for word in filter(None, (w.strip() for w in self.status.split(","))):
            if word not in STATUS_WORDS:
                raise BadInput(f"unknown status {word!r}", hint=f"use {', '.join(STATUS_WORDS)}")
            wanted.update(ACTIVE if word == "active" else TERMINAL if word == "terminal" else ())
            wanted.add(word)
        return wanted

    def checked(self) -> RunFilter:
        if self.page < 1 or not 1 <= self.per <= MAX_PER_PAGE:
            raise BadInput(
                f"page {self.page} of {self.per} runs is out of range",
                hint=f"page from 1, per from 1 to {MAX_PER_PAGE}",
            )
        return self


class RunNode(TypedDict):
    """One run on the page, with the runs it started nested beneath."""

    run: str
    status: str
    code: int | None
    reason: str | None
    created_at: str | None
    ended_at: str | None
    what: str
    owner_id: str | None
    units: int
    """Active work units: steps running now (at least 1 while the run is active)."""
    degraded: bool
    started_at: str | None
    duration_ms: int | None
    host: NotRequired[str | None]
    """The host of a run placed there from here (runtime.hosts); None for a run here."""
    completed: int | None
    """This and the counters below are runtime.views.counts's: a live run's from its
    progress.json, a finished one's from its result; None when the run has none yet."""
    failed: int | None
    timed_out: int | None
    cancelled: int | None
    attempts: int | None
    retries: int | None
    branches: dict[str, str]
    children: list[RunNode]


class SessionGroup(TypedDict):
    session: str
    units: int
    runs: list[RunNode]


class RunsPage(TypedDict):
    total: int
    """Matching top-level runs (the pages are cut from these)."""
    matched: int
    """Matching runs, children included."""
    page: int
    pages: int
    per: int
    counts: dict[str, int]
    """Matching runs by status."""
    groups: list[SessionGroup]


def what(run: Mapping[str, Any]) -> str:
    """What a run runs: its recipe or tool, else (an inline template) its command."""
    return str(run.get("recipe") or run.get("tool") or run.get("command") or "-")


def units(run: Mapping[str, Any]) -> int:
    """The ▷ a run counts for in `status --line`: its active steps, at least one."""
    if run.get("status") not in ACTIVE:
        return 0
    active = run.get("active")
    return max(1, active if isinstance(active, int) else 0)


def _matches(run: Mapping[str, Any], wanted: set[str], flt: RunFilter) -> bool:
    if wanted and run.get("status") not in wanted:
        return False
    if flt.session and run.get("owner_id") != flt.session:
        return False
    if flt.text:
        needle = flt.text.casefold()
        hay = f"{run.get('run')} {run.get('recipe') or ''} {run.get('tool') or ''} {run.get('command') or ''}"
        return needle in hay.casefold()
    return True


def _node(run: Mapping[str, Any], kids: Mapping[str, list[Mapping[str, Any]]]) -> RunNode:
    branches = run.get("branches")
    return {
        "run": str(run["run"]),
        "status": str(run.get("status")),
        "code": run.get("code"),
        "reason": run.get("reason"),
        "created_at": run.get("created_at"),
        "ended_at": run.get("ended_at"),
        "what": what(run),
        "owner_id": run.get("owner_id"),
        "units": units(run),
        "degraded": bool(run.get("degraded")),
        "started_at": run.get("started_at"),
        "duration_ms": run.get("duration_ms"),
        **_counts(run),  # type: ignore[typeddict-item]
        "branches": dict(branches) if isinstance(branches, dict) else {},
        "host": run.get("host"),
        "children": [_node(k, kids) for k in reversed(kids.get(str(run["run"]), []))],
    }


def _counts(run: Mapping[str, Any]) -> dict[str, int | None]:
    known = counts_of(run)
    return {k: known.get(k) for k in FINAL_COUNTS}


def page_of(runs: Sequence[Mapping[str, Any]], flt: RunFilter) -> RunsPage:
    """The page `flt` asks for of `runs` (newest first, as the board keeps them)."""
    flt = flt.checked()
    wanted = flt.statuses()
    matched = [r for r in runs if _matches(r, wanted, flt)]
    names = {str(r["run"]) for r in matched}
    kids: dict[str, list[Mapping[str, Any]]] = {}
    tops: list[Mapping[str, Any]] = []
    counts: dict[str, int] = {}
    for r in matched:
        counts[str(r.get("status"))] = counts.get(str(r.get("status")), 0) + 1
        parent = str(r.get("parent") or "")
        if parent.startswith("run:") and parent[4:] in names:
            kids.setdefault(parent[4:], []).append(r)
        else:
            tops.append(r)
    start = (flt.page - 1) * flt.per
    groups: dict[str, SessionGroup] = {}
    for r in tops[start : start + flt.per]:
        owner = str(r.get("owner_id") or "-")
        group = groups.setdefault(owner, {"session": owner, "units": 0, "runs": []})
        node = _node(r, kids)
        group["runs"].append(node)
        group["units"] += _all_units(node)
    return {
        "total": len(tops),
        "matched": len(matched),
        "page": flt.page,
        "pages": max(1, -(-len(tops) // flt.per)),
        "per": flt.per,
        "counts": counts,
        "groups": list(groups.values()),
    }


def _all_units(node: RunNode) -> int:
    return node["units"] + sum(_all_units(k) for k in node["children"])

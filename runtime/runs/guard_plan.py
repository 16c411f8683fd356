"""Which runs of an owner a guardian must watch or fold now, and the fold itself: the
guardian's decisions without its event loop, so the trio guardian (runtime.runs.guardian)
and the lean runner (runtime.runs.lean), which imports no trio, make the same ones.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from runtime.core.errors import ActorsError
from runtime.core.process import verify
from runtime.runs.index import list_runs
from runtime.runs.launch import reap_spawned
from runtime.runs.reconcile import fold_run
from runtime.runs.status import TERMINAL, load_run, runner_identity
from runtime.store.layout import StateRoot

WATCH, FOLD, WAIT = "watch", "fold", "wait"


def log(owner: str, what: str) -> None:
    """One line on stderr (the harness's log of the process): a guardian never raises
    into the command or server it runs in."""
    print(f"actors: guardian of {owner}: {what}", file=sys.stderr, flush=True)


def classify(root: StateRoot, run_id: str) -> tuple[str, dict[str, Any] | None]:
    """What a run of the owner needs now: `watch` (its runner is verified alive; with its
    identity), `fold` (the runner is proven gone or its pid is another process's now),
    or `wait` (no identity yet: its runner's ring will bring it back; or unverifiable)."""
    paths = root.run(run_id)
    if paths.followup.exists():
        return WAIT, None  # settled (list_runs saw it a moment before the marker)
    identity = runner_identity(paths, load_run(paths))
    if identity is None:
        return WAIT, None
    verdict, _reason = verify(identity)
    if verdict == "valid":
        return WATCH, identity
    return (FOLD, None) if verdict in ("dead", "mismatch") else (WAIT, None)


def plan(root: StateRoot, owner: str, busy: frozenset[str]) -> list[tuple[str, str, Any]]:
    """(run, action, identity) for every run of `owner` that is not settled nor already
    being watched. A run is settled once its follow-up marker exists."""
    plans = []
    for summary in list_runs(root):
        run_id = summary["run"]
        if summary.get("owner_id") != owner or run_id in busy:
            continue
        if summary.get("status") in TERMINAL and root.run(run_id).followup.exists():
            continue
        try:
            action, identity = classify(root, run_id)
        except (ActorsError, OSError) as exc:
            log(owner, f"run {run_id}: {exc}")
            continue
        if action != WAIT:
            plans.append((run_id, action, identity))
    return plans


def fold(root: StateRoot, owner: str, run_id: str) -> None:
    with contextlib.suppress(ValueError):  # a spawn reaping the same pid at this instant
        reap_spawned()  # a runner this process started (the MCP server's): no zombie
    try:
        fold_run(root, root.run(run_id))
    except Exception as exc:  # one bad run must not stop the guardian
        log(owner, f"run {run_id}: {type(exc).__name__}: {exc}")

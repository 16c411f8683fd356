"""Explicit, run-aware cleanup: archive and prune terminal runs, sweep stale temp files.

Nothing here touches a run that is not terminal, and the start-up sweep only ever looks
inside `<root>/tmp/` (never `runs/`, `archive/` or `preserved/`), so archived runs and
preserved artifacts survive every cleanup.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.errors import ActorsError, Conflict
from runtime.core.ids import now_iso
from runtime.store import safe
from runtime.store.layout import StateRoot
from runtime.store.writes import ensure_dir, write_bytes_atomic
from runtime.views.index import forget
from runtime.views.status import TERMINAL, derive, find_run

if TYPE_CHECKING:
    from runtime.store.records import RunStatus

TMP_MAX_AGE_S = 24 * 3600


CACHE_MAX_AGE_S = 30 * 86400
PRESERVE_MAX_BYTES = 256 * 1024 * 1024
"""The largest artifact `prune --preserve-artifacts` copies (it is read whole)."""


def cleanup_tmp(root: StateRoot, *, max_age_s: float = TMP_MAX_AGE_S) -> int:
    """Sweep stale `<root>/tmp` entries and compiled recipes unused for 30 days.

    Fail-open (a race or permission problem skips the entry); returns how many were removed.
    """
    return _sweep(root.tmp, max_age_s) + _sweep(root.recipe_cache, CACHE_MAX_AGE_S)


def _sweep(directory: Path, max_age_s: float) -> int:
    """Remove old entries of `directory`, reached without following a link (a planted
    link there, or at any of its parents, sweeps nothing); each entry is removed relative
    to the directory's descriptor, a link as a name, never its target."""
    cutoff = time.time() - max_age_s
    try:
        with safe.scandir(directory) as (fd, entries):
            return sum(_sweep_entry(fd, entry, cutoff) for entry in entries)
    except (OSError, ActorsError):
        return 0


def _sweep_entry(fd: int, entry: os.DirEntry[str], cutoff: float) -> int:
    try:
        if entry.stat(follow_symlinks=False).st_mtime >= cutoff:
            return 0
        if entry.is_dir(follow_symlinks=False):
            import shutil  # only when something is swept: spawn imports this module

            shutil.rmtree(entry.name, dir_fd=fd)
        else:
            os.unlink(entry.name, dir_fd=fd)
        return 1
    except OSError:
        return 0


def require_terminal(root: StateRoot, run_id: str, action: str) -> RunStatus:
    paths, run = find_run(root, run_id)
    summary = derive(paths, run)
    if summary["status"] not in TERMINAL:
        raise Conflict(
            f"run {run_id} is {summary['status']}; only finished runs can be {action}",
            hint=f"stop it first: actors cancel {run_id}",
        )
    # A run archived or pruned between its result.json and its follow-up would never be
    # found again by its runner or the reconciler: send the follow-up now (deduplicated by
    # its delivery id, so racing the runner cannot double it).
    from runtime.delivery.followups import follow_up_terminal

    follow_up_terminal(root, paths, run)
    return summary


def archive_run(root: StateRoot, run_id: str) -> Path:
    """Move a terminal run to `<root>/archive/<id>[-<ts>]`; returns the new location."""
    require_terminal(root, run_id, "archived")
    ensure_dir(root.archive)
    target = root.archived(run_id)
    if os.path.lexists(target):
        target = root.archived(run_id, now_iso().replace(":", ""))
    safe.rename(root.runs / run_id, target)
    forget(root, run_id)
    return target


def prune_run(root: StateRoot, run_id: str, *, preserve_artifacts: bool = False) -> dict[str, Any]:
    """Delete a terminal run's state; optionally copy its existing artifacts aside first."""
    summary = require_terminal(root, run_id, "pruned")
    paths, run = find_run(root, run_id)
    preserved: dict[str, str] = {}
    if preserve_artifacts:
        for name, spec in (run.get("artifacts") or {}).items():
            where = spec.get("path") if isinstance(spec, dict) else None
            src = Path(where) if isinstance(where, str) and "\0" not in where else None
            if src is None or not src.is_file() or src.stat().st_size > PRESERVE_MAX_BYTES:
                continue  # run.json names it: a run could aim it at anything, of any size
            data = src.read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:8]
            dest_dir = ensure_dir(root.preserved / run_id)
            dest = dest_dir / f"{name}-{digest}--{src.name}"
            write_bytes_atomic(dest, data)  # 0600, never through a planted link
            preserved[name] = str(dest)
    # Rename first so a crash mid-delete never leaves a half run that looks alive.
    doomed = root.prune_stage(run_id, os.getpid())
    ensure_dir(root.tmp)
    safe.rename(paths.dir, doomed)
    forget(root, run_id)
    with contextlib.suppress(OSError, ActorsError):
        safe.rmtree(doomed)
    return {"run": run_id, "pruned": True, "status": summary["status"], "preserved": preserved}

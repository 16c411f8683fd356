"""`index.json`: a rebuildable cache that keeps `actors ls` fast over many runs.

It stores only facts that never change once known (id, creation time, recipe, owner,
parent, and the status recorded in result.json once it exists), keyed by the identity of
the run's run.json file (inode and mtime), so a new run reusing an id is never mistaken
for the old one and no status can go stale: anything without a result is derived live. A missing or corrupt
index is rebuilt from a scan of `runs/`; writing it is best-effort.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from runtime.core.errors import ActorsError, NotFound, StateDamaged
from runtime.core.ids import is_valid_id, now_iso
from runtime.store import safe
from runtime.store.appends import locked
from runtime.store.layout import RUN_JSON, RunPaths, StateRoot
from runtime.store.reads import read_json
from runtime.store.trust import trusted_dir
from runtime.store.writes import write_json_atomic
from runtime.views.counts import FINAL_COUNTS
from runtime.views.status import TERMINAL, damaged_file, derive, load_run

if TYPE_CHECKING:
    from runtime.store.records import ListedRun, RunStatus

INDEX_VERSION = 4
INDEX_MAX_BYTES = 64 * 1024 * 1024
"""An index.json larger than this (some 200,000 runs) is not read: it is rebuilt."""
_STATIC = ("created_at", "recipe", "tool", "command", "owner_id", "parent")
_FINAL = (
    "pid",
    "status",
    "code",
    "degraded",
    "ended_at",
    "reason",
    "started_at",
    "duration_ms",
    *FINAL_COUNTS,
)
"""What result.json settles: cached with the static facts once the run has a result
(its step counters are runtime.views.counts's)."""
LISTED = ("run", "address", "state_dir", *_STATIC, *_FINAL)
"""The keys of every listed run, in this order, whether it came from the index or was
derived live (a run whose state is damaged also has `damaged`, what is wrong, and
`damaged_file`, the file named relative to its directory)."""


def _listed(name: str, run_dir: str, facts: Mapping[str, Any]) -> ListedRun:
    summary: dict[str, Any] = {"run": name, "address": f"run:{name}", "state_dir": run_dir}
    summary.update({k: facts.get(k) for k in LISTED[3:]})
    if "damaged" in facts:
        summary["damaged"] = facts["damaged"]
        summary["damaged_file"] = facts.get("damaged_file") or "run.json"
    return cast("ListedRun", summary)


def _damaged(name: str, run_dir: str, paths: RunPaths, exc: StateDamaged) -> ListedRun:
    """A run whose run.json (or directory) cannot be used: listed as `damaged`, naming
    the file, so one run's damage never stops a listing of the others."""
    facts = {
        "status": "damaged",
        "reason": exc.message,
        "damaged": exc.message,
        "damaged_file": damaged_file(exc, paths),
    }
    return _listed(name, run_dir, facts)  # the keys of LISTED, which ListedRun declares


def _load(root: StateRoot) -> dict[str, dict[str, Any]]:
    try:
        data = read_json(root.index_file, max_bytes=INDEX_MAX_BYTES)
    except StateDamaged:
        return {}
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION:
        return {}
    runs = data.get("runs")
    return runs if isinstance(runs, dict) else {}


def _usable(entry: Any) -> bool:
    """A cached entry of the shape this module writes (a damaged one is re-derived)."""
    if not isinstance(entry, dict):
        return False
    terminal = entry.get("terminal")
    if not isinstance(terminal, dict) or terminal.get("status") not in TERMINAL:
        return False
    for key in _STATIC:  # a loop, not all(<generator>): this runs once per listed run
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            return False
    for key, types in _FINAL_TYPES.items():  # noqa: SIM110 (a loop: see above)
        if not isinstance(terminal.get(key), types):
            return False
    return True


_FINAL_TYPES: dict[str, tuple[type, ...]] = {
    "pid": (int, type(None)),
    "code": (int, type(None)),
    "degraded": (bool, type(None)),
    "ended_at": (str, type(None)),
    "reason": (str, type(None)),
    "started_at": (str, type(None)),
    "duration_ms": (int, type(None)),
    **{k: (int, type(None)) for k in FINAL_COUNTS},
}


def _stamp(run_dir: str) -> str | None:
    """Identity of a run's run.json: a new run reusing an id has a different one.

    (Plain strings, not pathlib, in this loop: it runs once per run on every listing.)
    """
    try:
        st = os.stat(f"{run_dir}/{RUN_JSON}", follow_symlinks=False)
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_mtime_ns}"


def list_runs(root: StateRoot) -> list[ListedRun]:
    """Status summaries of every run in the root, newest first."""
    names = safe.subdirs(root.runs)
    for name in names:  # another user's run dir, or one writable by others: refused
        trusted_dir(root.runs / name, root=root.path)
    if not names:
        return []
    cached = _load(root)
    runs_dir = str(root.runs)
    fresh: dict[str, dict[str, Any]] = {}
    summaries: list[ListedRun] = []
    for name in names:
        if not is_valid_id(name):
            continue
        run_dir = f"{runs_dir}/{name}"
        stamp = _stamp(run_dir)
        entry = cached.get(name)
        if stamp and entry is not None and _usable(entry) and entry.get("stamp") == stamp:
            fresh[name] = entry
            summaries.append(_listed(name, run_dir, {**entry, **entry["terminal"]}))
            continue
        paths = RunPaths(root.runs / name)
        try:
            summary = derived(paths)
        except NotFound:
            continue  # archived or pruned since the scan
        except StateDamaged as exc:
            summaries.append(_damaged(name, run_dir, paths, exc))
            continue
        summaries.append(_listed(name, run_dir, summary))
        new_entry: dict[str, Any] = {k: summary.get(k) for k in _STATIC}
        new_entry["stamp"] = stamp
        if summary.get("from_result"):  # only result.json makes a status final
            new_entry["terminal"] = {k: summary.get(k) for k in _FINAL}
        fresh[name] = new_entry
    if fresh != cached:
        _save(root, fresh)
    summaries.sort(key=lambda s: str(s.get("created_at") or ""), reverse=True)
    return summaries


def _save(root: StateRoot, runs: dict[str, dict[str, Any]]) -> None:
    try:
        with locked(root.index_lock):
            write_json_atomic(
                root.index_file,
                {"version": INDEX_VERSION, "rebuilt_at": now_iso(), "runs": runs},
                fsync=False,
            )
    except (OSError, ActorsError):
        pass  # a cache we could not write (a full disk) is rebuilt by the next listing


def forget(root: StateRoot, run_id: str) -> None:
    """Drop one run from the index (after archive or prune)."""
    cached = _load(root)
    if cached.pop(run_id, None) is not None:
        _save(root, cached)


def listed_one(root: StateRoot, name: str) -> ListedRun | None:
    """One run as `list_runs` lists it, derived live; None when it is gone (archived,
    pruned) or `name` is no run id. For a reader that keeps a listing and refreshes only
    the runs whose files changed (the dashboard's board) instead of listing them all."""
    if not is_valid_id(name):
        return None
    paths = root.run(name)  # a planted link is refused here
    try:
        summary = derived(paths)
    except NotFound:
        return None
    except StateDamaged as exc:
        return _damaged(name, str(paths.dir), paths, exc)
    return _listed(name, str(paths.dir), summary)


def derived(paths: RunPaths) -> RunStatus:
    """A run's status from its files, for a view of many runs: NotFound when it is gone,
    StateDamaged for its damage, an unforeseen kind included (an error no reader expected
    is still this one run's, listed as damaged; ACTORS_DEBUG=1 raises it as it is)."""
    try:
        return derive(paths, load_run(paths))
    except ActorsError:
        raise
    except Exception as exc:
        from runtime.core import config

        if config.flag(config.DEBUG):
            raise
        what = f"{type(exc).__name__}: {exc}"[:200]
        raise StateDamaged(
            f"run {paths.run_id}: its files cannot be read ({what})", path=paths.run_json
        ) from exc

"""`actors install` / `uninstall`: merge our entries into a harness's config files.

Each edit is a merge, never a rewrite: other MCP servers, hooks and settings stay as they
are, a second install changes nothing, and the file's bytes before the first install are
kept as `<file>.actors-backup`. `uninstall` restores those exact bytes (and the file's
mode, and a symlink) when the file is still what we wrote; if someone edited it since, it
removes only our entries. Install touches nothing it does not own (actors.install_files):
a file keeps its mode, a symlinked one is written through, only missing directories are
created. A write that fails takes back the files this install already wrote.

What is written, per harness and scope, is the harness's own business: PLANS names the
`plan(scope, wake, command)` of each adapter package (adapters/<harness>/install.py),
imported only for the harness being installed. Reading, backing up, writing and
recording the files (`installs.json`) is the same for all of them, here.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.install_files import make_dirs, read_config, remove_dirs, restore_config, write_config
from adapters.install_edits import Edit, actors_command
from runtime.core.errors import ActorsError, BadInput
from runtime.store.appends import locked
from runtime.store.layout import StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_bytes_atomic, write_json_atomic

PLANS = {
    "claude-code": "adapters.claude_code.install:plan",
    "codex": "adapters.codex.install:plan",
    "opencode": "adapters.opencode.install:plan",
    "kilo": "adapters.opencode.install:plan_kilo",
    "qwen-code": "adapters.qwen:plan",
    "copilot": "adapters.copilot:plan",
    "pi": "adapters.pi.install:plan",
}
HARNESSES = tuple(PLANS)


def plan(harness: str, scope: str, wake: str = "hook", inbound: str | None = None) -> list[Edit]:
    """The files `install` would touch for this harness and scope (`inbound`: Claude
    Code's crossSessionInbound setting too)."""
    if harness not in PLANS:
        raise BadInput(f"unknown harness {harness!r}", hint=f"use one of {', '.join(HARNESSES)}")
    if inbound is not None and (harness != "claude-code" or inbound != "accept"):
        raise BadInput(
            f"--cross-session-inbound {inbound} is not for {harness}",
            hint="use it as `actors install claude-code --cross-session-inbound accept`",
        )
    if inbound is not None and scope == "project":
        raise BadInput(
            "Claude Code reads crossSessionInbound: accept from user settings only (a"
            " project's settings may only tighten it)",
            hint="use `actors install claude-code --user --cross-session-inbound accept`",
        )
    module, _, attr = PLANS[harness].partition(":")
    extra = {"inbound": inbound} if inbound else {}
    edits: list[Edit] = getattr(importlib.import_module(module), attr)(
        scope, wake, actors_command(), **extra
    )
    return edits


def next_steps(harness: str) -> Callable[[str], list[str]]:
    """The harness's `next_steps(scope)`: what install cannot do for the user."""
    module = importlib.import_module(PLANS[harness].partition(":")[0])
    steps: Callable[[str], list[str]] = getattr(module, "next_steps", lambda scope: [])
    return steps


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _records(root: StateRoot) -> dict[str, Any]:
    data = read_json(root.installs)
    return data if isinstance(data, dict) else {}


def install(
    root: StateRoot,
    harness: str,
    scope: str,
    *,
    dry_run: bool = False,
    wake: str = "hook",
    inbound: str | None = None,
) -> list[dict[str, Any]]:
    if wake not in ("hook", "watcher"):
        raise BadInput(f"unknown wake {wake!r}", hint="use --wake hook or --wake watcher")
    edits = plan(harness, scope, wake, inbound)
    if dry_run:
        return _results(_staged(edits), dry_run=True)
    ensure_dir(root.path)
    with locked(root.installs_lock):  # the configs and records read and written as one
        return _install_staged(root, _staged(edits), (harness, scope))


Staged = list[tuple[Edit, "str | None", "os.stat_result | None", str]]


def _staged(edits: list[Edit]) -> Staged:
    """Every edit applied in memory first: a bad file aborts before any write."""
    staged: Staged = []
    for edit in edits:
        original, st = read_config(edit.path)
        staged.append((edit, original, st, edit.add(original)))
    return staged


def _results(staged: Staged, *, dry_run: bool = False) -> list[dict[str, Any]]:
    return [
        {
            "path": str(e.path),
            "changed": new != (old or ""),
            "what": e.what,
            "content": new if dry_run else None,
        }
        for e, old, _, new in staged
    ]


def _install_staged(
    root: StateRoot, staged: Staged, owner: tuple[str, str]
) -> list[dict[str, Any]]:
    """Write what `_staged` prepared, with its records; everything taken back on a
    failure (under the installs lock)."""
    records = _records(root)
    results = _results(staged)
    undo: list[Callable[[], None]] = []
    try:
        for edit, original, st, new in staged:
            if new != (original or ""):
                _install_one(records, edit.path, original, st, new, owner, undo)
                _note_added(records[str(edit.path)], edit.added)
        write_json_atomic(root.installs, records)
    except (OSError, ActorsError) as exc:
        for step in reversed(undo):
            with contextlib.suppress(OSError):
                step()
        if isinstance(exc, ActorsError):
            raise
        raise BadInput(
            f"cannot write {exc.filename or 'a config file'}: {exc.strerror or exc}",
            hint="nothing was changed",
        ) from None
    return results


def _install_one(
    records: dict[str, Any],
    path: Path,
    original: str | None,
    st: os.stat_result | None,
    new: str,
    owner: tuple[str, str],
    undo: list[Callable[[], None]],
) -> None:
    """Write one config file (and its backup and record), noting how to take it back."""
    key = str(path)
    created = make_dirs(path.parent)
    undo.append(lambda: remove_dirs(created))
    if key not in records:
        backup = path.with_name(path.name + ".actors-backup")
        if original is not None:
            write_bytes_atomic(backup, original.encode())
            undo.append(lambda: backup.unlink(missing_ok=True))
        records[key] = {
            "harness": owner[0],
            "scope": owner[1],
            "existed": original is not None,
            "backup": str(backup) if original is not None else None,
            "mode": stat.S_IMODE(st.st_mode) if st is not None else None,
            "link": os.readlink(path) if path.is_symlink() else None,
        }
    records[key]["created_dirs"] = [*records[key].get("created_dirs", []), *created]
    write_config(path, new.encode(), st)
    if original is None:
        undo.append(lambda: path.unlink(missing_ok=True))
    else:
        undo.append(lambda: write_config(path, original.encode(), st))
    records[key]["written_sha"] = _sha(new)


def _note_added(record: dict[str, Any], added: Any) -> None:
    """Keep what install put in that was not there before (lists merged over installs),
    so uninstall takes out exactly that."""
    if not isinstance(added, dict):
        return
    kept = record.setdefault("added", {})
    for key, items in added.items():
        kept[key] = [*kept.get(key, []), *(i for i in items if i not in kept.get(key, []))]


def uninstall(root: StateRoot, harness: str, scope: str) -> list[dict[str, Any]]:
    if not root.path.exists():
        return _uninstall(root, harness, scope)  # nothing was installed from this root
    with locked(root.installs_lock):
        return _uninstall(root, harness, scope)


def _uninstall(root: StateRoot, harness: str, scope: str) -> list[dict[str, Any]]:
    records = _records(root)
    results: list[dict[str, Any]] = []
    # last written first: a directory an earlier file's install created (OpenCode's
    # config dir) is empty, and removed, only once the later files in it are gone
    for edit in reversed(plan(harness, scope)):
        key = str(edit.path)
        record = records.get(key)
        current, st = read_config(edit.path)
        action = _uninstall_one(edit, record, current, st)
        results.insert(0, {"path": key, "action": action})
        if record:
            if record.get("backup"):
                Path(record["backup"]).unlink(missing_ok=True)
            del records[key]
    if root.path.exists():
        write_json_atomic(root.installs, records)
    return results


def _uninstall_one(
    edit: Edit, record: dict[str, Any] | None, current: str | None, st: os.stat_result | None
) -> str:
    """Put one file back: the original bytes, mode and link when the file is still what
    install wrote; else only our entries out (the file keeps its mode)."""
    path = edit.path
    backup = Path(record["backup"]) if record and record.get("backup") else None
    if current is None:
        action = "absent"
    elif (
        record
        and record.get("written_sha") == _sha(current)
        and (backup is None or backup.is_file())
    ):
        if backup is not None:
            restore_config(path, backup.read_bytes(), record.get("mode"), record.get("link"))
        else:
            path.unlink()
        action = "restored"
    else:
        cleaned = edit.remove(current, record.get("added") if record else None)
        if cleaned != current:
            write_config(path, cleaned.encode(), st)
        action = "removed entries" if cleaned != current else "unchanged"
    if record and action != "removed entries":
        remove_dirs(record.get("created_dirs") or [])
    return action

"""`actors install` / `uninstall`: merge our entries into a harness's config files.

Each edit is a merge, never a rewrite: other MCP servers, hooks and settings stay as they
are, a second install changes nothing, and the file's bytes before the first install are
kept as `<file>.actors-backup`. `uninstall` restores those exact bytes when the file is
still what we wrote; if someone edited it since, it removes only our entries.

What is written, per harness and scope, is the harness's own business: PLANS names the
`plan(scope, wake, command)` of each adapter package (adapters/<harness>/install.py),
imported only for the harness being installed. Reading, backing up, writing and
recording the files (`installs.json`) is the same for all of them, here.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from typing import Any

from adapters.install_edits import Edit, actors_command
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_bytes_atomic, write_json_atomic

PLANS = {
    "claude-code": "adapters.claude_code.install:plan",
    "codex": "adapters.codex.install:plan",
    "opencode": "adapters.opencode.install:plan",
}
HARNESSES = tuple(PLANS)


def plan(harness: str, scope: str, wake: str = "hook") -> list[Edit]:
    """The files `install` would touch for this harness and scope."""
    if harness not in PLANS:
        raise BadInput(f"unknown harness {harness!r}", hint=f"use one of {', '.join(HARNESSES)}")
    module, _, attr = PLANS[harness].partition(":")
    edits: list[Edit] = getattr(importlib.import_module(module), attr)(
        scope, wake, actors_command()
    )
    return edits


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _records(root: StateRoot) -> dict[str, Any]:
    data = read_json(root.installs)
    return data if isinstance(data, dict) else {}


def install(
    root: StateRoot, harness: str, scope: str, *, dry_run: bool = False, wake: str = "hook"
) -> list[dict[str, Any]]:
    if wake not in ("hook", "watcher"):
        raise BadInput(f"unknown wake {wake!r}", hint="use --wake hook or --wake watcher")
    edits = plan(harness, scope, wake)
    results = []
    staged = []
    for edit in edits:  # compute everything first: a bad file aborts before any write
        original = edit.path.read_text() if edit.path.exists() else None
        staged.append((edit, original, edit.add(original)))
    records = _records(root)
    for edit, original, new in staged:
        changed = new != (original or "")
        results.append(
            {"path": str(edit.path), "changed": changed, "content": new if dry_run else None}
        )
        if dry_run or not changed:
            continue
        backup = edit.path.with_name(edit.path.name + ".actors-backup")
        key = str(edit.path)
        if key not in records:
            if original is not None:
                write_bytes_atomic(backup, original.encode())
            records[key] = {
                "harness": harness,
                "scope": scope,
                "existed": original is not None,
                "backup": str(backup) if original is not None else None,
            }
        ensure_dir(edit.path.parent)
        write_bytes_atomic(edit.path, new.encode())
        os.chmod(edit.path, 0o600)
        records[key]["written_sha"] = _sha(new)
    if not dry_run:
        ensure_dir(root.path)
        write_json_atomic(root.installs, records)
    return results


def uninstall(root: StateRoot, harness: str, scope: str) -> list[dict[str, Any]]:
    records = _records(root)
    results = []
    for edit in plan(harness, scope):
        key = str(edit.path)
        record = records.get(key)
        current = edit.path.read_text() if edit.path.exists() else None
        if current is None:
            results.append({"path": key, "action": "absent"})
        elif record and record.get("written_sha") == _sha(current):
            if record.get("existed") and record.get("backup"):
                original = Path(record["backup"]).read_bytes()
                write_bytes_atomic(edit.path, original)
            else:
                edit.path.unlink()
            results.append({"path": key, "action": "restored"})
        else:
            cleaned = edit.remove(current)
            if cleaned != current:
                write_bytes_atomic(edit.path, cleaned.encode())
            results.append(
                {"path": key, "action": "removed entries" if cleaned != current else "unchanged"}
            )
        if record:
            if record.get("backup"):
                Path(record["backup"]).unlink(missing_ok=True)
            del records[key]
    if root.path.exists():
        write_json_atomic(root.installs, records)
    return results

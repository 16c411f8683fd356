"""`inspect`: intentional, bounded reads of a run, branch, room or session.

Every view returns plain data (the CLI renders it compactly, `--json` prints it whole)
and reads at most `lines` records from the end of a journal, so inspecting a run with a
huge history stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from runtime.compiler.redact import redact_deep, redact_values, run_secrets
from runtime.core.errors import BadInput, StateDamaged
from runtime.messaging.addresses import parse_address
from runtime.messaging.boxes import accepted_types, branch_mailbox, run_mailbox
from runtime.store.layout import DOORBELLS, FOLLOWERS, GUARDIANS, RunPaths, StateRoot
from runtime.store.reads import (
    MAX_JOURNAL_BYTES,
    open_nofollow,
    read_json,
    read_text_tail,
    tail_jsonl,
)
from runtime.views.index import list_runs
from runtime.views.status import ACTIVE, TERMINAL, derive, find_run, full_status, read_result
from runtime.views.swarm_tasks import swarm_tasks

if TYPE_CHECKING:
    from runtime.store.records import RunRecord

LINES = 40
"""How many records of each list a view shows by default (CLI `-n`, MCP `lines`, API)."""
MAX_LINES = 2000
"""The most records a view shows, whoever asks."""
RUN_VIEWS = ("status", "tail", "messages", "artifacts", "files", "mailbox", "communication")
ROOM_VIEWS = ("status", "messages", "roster", "tasks")
SESSION_VIEWS = ("status", "runs")
STATUS_FILTERS = ("all", "active", "running", "terminal", *TERMINAL)


def inspect(
    root: StateRoot, target: str, view: str = "status", *, lines: int = LINES, status: str = "all"
) -> dict[str, Any]:
    """The view's data, every list in it cut to the newest `lines` records (a list that
    was cut says how many it left out in `<list>_omitted`)."""
    if isinstance(lines, bool) or not isinstance(lines, int) or not 0 <= lines <= MAX_LINES:
        raise BadInput(
            f"lines must be a whole number from 0 to {MAX_LINES}, got {lines!r}",
            hint=f"e.g. -n {LINES}",
        )
    if target == "session:all":
        return _session(root, None, view, status, lines)
    if ":" not in target:  # a bare id is a run, as for every command that takes a run
        target = f"run:{target}"
    address = parse_address(target)
    if address.kind == "run":
        return _run(root, address.target or "", view, lines)
    if address.kind == "branch":
        paths, run = find_run(root, address.target or "")
        view = "mailbox" if view == "status" else view
        _require(view, ("mailbox",), target)
        box = branch_mailbox(paths, address.branch or "")
        entries = _entries(box.entries(), lines)
        return {"target": target, "view": view, "entries": redact_deep(entries, run_secrets(run))}
    if address.kind == "room":
        return _room(root, address.target or "", view, lines)
    if address.kind == "session":
        return _session(root, address.target, view, status, lines)
    raise BadInput(
        f"cannot inspect {target}", hint="inspect run:, branch:, room: or session: targets"
    )


def _require(view: str, allowed: tuple[str, ...], target: str) -> None:
    if view not in allowed:
        raise BadInput(f"{target} has no view {view!r}", hint=f"use one of: {', '.join(allowed)}")


def _entries(entries: Sequence[Mapping[str, Any]], lines: int) -> list[dict[str, Any]]:
    out = []
    for entry in entries[-lines:] if lines > 0 else []:
        env = entry.get("envelope")
        env = env if isinstance(env, dict) else {}
        out.append(
            {
                "id": entry["id"],
                "state": entry.get("state"),
                "type": env.get("type"),
                "from": env.get("from"),
                "to": env.get("to"),
                "summary": env.get("summary"),
                "ts": env.get("ts"),
                "error": entry.get("error"),
            }
        )
    return out


def _run(root: StateRoot, run_id: str, view: str, lines: int) -> dict[str, Any]:
    _require(view, RUN_VIEWS, f"run:{run_id}")
    paths, run = find_run(root, run_id)
    out: dict[str, Any] = {"target": f"run:{run_id}", "view": view}
    if view == "status":
        from runtime.views.index import list_runs

        out.update(full_status(paths, run))
        children = [r for r in list_runs(root) if r.get("parent") == f"run:{run_id}"]
        _cut(
            out,
            "children",
            [_row(r, ("run", "status", "recipe", "created_at")) for r in children],
            lines,
        )
    elif view == "tail":
        out["stdout"] = read_text_tail(paths.stdout, lines)
        out["stderr"] = read_text_tail(paths.stderr, min(lines, 10))
    elif view == "messages":
        out["messages"] = [
            {k: m.get(k) for k in ("id", "ts", "type", "from", "to", "summary", "level", "body")}
            for m in tail_jsonl(paths.outbox, lines)
        ]
    elif view == "artifacts":
        result = read_result(paths)
        if result is not None and result.get("artifacts") is not None:
            out["artifacts"] = result["artifacts"]
        else:
            from runtime.views.artifacts import manifest

            out["artifacts"] = manifest(run.get("artifacts") or {})
    elif view == "files":
        _cut(out, "files", _files(paths), lines)
    elif view == "mailbox":
        mailbox = run.get("mailbox") or {}
        out.update(
            accepts=accepted_types(run),
            emits=mailbox.get("emits", []),
            endpoint=mailbox.get("endpoint", "mailbox"),
            entries=_entries(run_mailbox(paths).entries(), lines),
        )
    else:
        out["communication"] = read_json(paths.communication)
    if view == "status":
        out["values"] = redact_values(run.get("values") or {}, run.get("secret_names", []))
    # what the run's commands printed or sent may quote a secret value: mask it here too
    masked: dict[str, Any] = redact_deep(out, run_secrets(run))
    return masked


def _files(paths: RunPaths) -> list[dict[str, Any]]:
    files = []
    for dirpath, dirnames, filenames in os.walk(paths.dir):
        dirnames[:] = [d for d in dirnames if d not in (DOORBELLS, GUARDIANS, FOLLOWERS)]
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            files.append({"path": os.path.relpath(full, paths.dir), "bytes": st.st_size})
    return files


def _room(root: StateRoot, run_id: str, view: str, lines: int) -> dict[str, Any]:
    _require(view, ROOM_VIEWS, f"room:{run_id}")
    paths, run = find_run(root, run_id)
    timeline = paths.room_timeline
    whole = {"roster": 2000, "tasks": MAX_LINES}.get(view)
    recent = tail_jsonl(timeline, whole or max(lines, 1))
    out: dict[str, Any] = {"target": f"room:{run_id}", "view": view}
    if view == "tasks":
        ended = derive(paths, run)["status"] in TERMINAL
        table = swarm_tasks(recent, ended=ended)
        tasks = table["tasks"]
        out.update(table, tasks=tasks[-lines:] if lines > 0 else [])
        if len(tasks) > lines:
            out["tasks_omitted"] = len(tasks) - lines
    elif view == "messages":
        out["messages"] = [
            {k: m.get(k) for k in ("id", "ts", "type", "from", "summary", "body")}
            for m in (recent[-lines:] if lines > 0 else [])
        ]
    elif view == "roster":
        out["roster"] = _roster(run, recent)
    else:
        last = recent[-1] if recent else {}
        out.update(
            messages=_count_lines(timeline),
            last_type=last.get("type"),
            last_from=last.get("from"),
            last_at=last.get("ts"),
            members=len(_roster(run, recent)),
        )
    masked: dict[str, Any] = redact_deep(out, run_secrets(run))
    return masked


def _count_lines(path: Any) -> int:
    """The lines of a room's timeline, counted a block at a time (never a whole line in
    memory) and no further than any journal holds."""
    try:
        fd = open_nofollow(path)
    except (FileNotFoundError, StateDamaged):
        return 0
    try:
        count, position = 0, 0
        while position < MAX_JOURNAL_BYTES and (block := os.pread(fd, 1 << 20, position)):
            count += block.count(b"\n")
            position += len(block)
        return count
    finally:
        os.close(fd)


def _roster(run: RunRecord, recent: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Members: the run itself, every sender seen in the room, minus those who left."""
    roster: dict[str, dict[str, Any]] = {f"run:{run['run']}": {"role": "run", "status": "present"}}
    for message in recent:
        sender = str(message.get("from"))
        if not sender.startswith(("run:", "branch:")):
            continue
        if message.get("type") == "actor.leave":
            roster.pop(sender, None)
            continue
        info = roster.setdefault(
            sender,
            {"role": "branch" if sender.startswith("branch:") else "run", "status": "present"},
        )
        info["last_seen"] = message.get("ts")
        info["last_type"] = message.get("type")
    return roster


def _row(record: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: record.get(k) for k in keys}


def _cut(out: dict[str, Any], key: str, items: list[Any], lines: int) -> None:
    """`out[key]`: the first `lines` of `items` (the newest, for lists kept newest first),
    and how many were left out when some were."""
    out[key] = items[:lines]
    if len(items) > lines:
        out[f"{key}_omitted"] = len(items) - lines


def _session(
    root: StateRoot, session: str | None, view: str, status: str, lines: int
) -> dict[str, Any]:
    target = f"session:{session or 'all'}"
    _require(view, SESSION_VIEWS, target)
    if status not in STATUS_FILTERS:
        raise BadInput(
            f"unknown status filter {status!r}", hint=f"use one of: {', '.join(STATUS_FILTERS)}"
        )
    runs = [r for r in list_runs(root) if session is None or r.get("owner_id") == session]
    if status == "active":
        runs = [r for r in runs if r.get("status") in ACTIVE]
    elif status == "terminal":
        runs = [r for r in runs if r.get("status") in TERMINAL]
    elif status != "all":
        runs = [r for r in runs if r.get("status") == status]
    counts: dict[str, int] = {}
    for r in runs:
        counts[str(r.get("status"))] = counts.get(str(r.get("status")), 0) + 1
    out: dict[str, Any] = {"target": target, "view": view, "counts": counts, "total": len(runs)}
    if view == "runs":  # newest first, like `actors ls`
        keys = ("run", "status", "recipe", "created_at", "owner_id")
        _cut(out, "runs", [_row(r, keys) for r in runs], lines)
    return out


_SINGULAR = {
    "entries": "entry",
    "messages": "message",
    "runs": "run",
    "files": "file",
    "stdout": "out",
    "stderr": "err",
}


def compact_lines(data: Mapping[str, object]) -> list[str]:
    """A view as text for a reader with little room (the CLI without `--json`, and the
    MCP `inspect` result): its scalars as `key=value` on the first line, then one line
    per record, `key: a, b` for lists of names and `key.sub: value` for mappings. Each
    line is escaped (runtime.core.terminal.cell): a newline in a run-written summary or
    value shows as `\\n` and cannot forge a record."""
    import json

    from runtime.core.terminal import cell

    def show(v: object) -> str:
        return json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v)

    out: list[str] = []
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict))}
    out.append(" ".join(f"{k}={v}" for k, v in scalars.items() if v is not None))
    for key, value in data.items():
        if (
            isinstance(value, list)
            and all(isinstance(i, str) for i in value)
            and key not in _SINGULAR
        ):
            out.append(f"  {key}: {', '.join(value) if value else '-'}")
        elif isinstance(value, list):
            label = _SINGULAR.get(key, key)
            for item in value:
                if isinstance(item, dict):
                    fields = " ".join(f"{k}={show(v)}" for k, v in item.items() if v is not None)
                    out.append(f"  {label}: {fields}")
                else:
                    out.append(f"  {label}: {item}")
        elif isinstance(value, dict):
            for k, v in value.items():
                out.append(f"  {key}.{k}: {show(v)}")
    return [cell(line) for line in out]

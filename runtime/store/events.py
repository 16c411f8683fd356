"""The run's lifecycle journal (events.jsonl) and its snapshot files.

Every record carries the run's `run_instance_id`, so a reader can tell which start of a
run wrote it, and an id that sorts by time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.core.ids import new_id, now_iso
from runtime.store.appends import append_jsonl
from runtime.store.journals import LOG
from runtime.store.writes import write_json_atomic

TERMINAL_EVENTS = {
    "run.done",
    "run.failed",
    "run.cancelled",
    "run.killed",
    "run.exited",
    "run.skipped",
}
STOP_EVENTS = {"run.kill": "killed", "run.cancel": "cancelled"}
PREVIEW_CHARS = 4096
"""The longest text an event keeps of one field (a command line, a reason)."""
PREVIEW_ITEMS = 100
"""The most items an event keeps of one list."""


def preview_text(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text`, or its first `limit` characters and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters cut]"


def preview_fields(value: Any) -> Any:
    """JSON-like data with every text and list cut to a bounded preview, so a record of
    legal input (a huge argument, many branches) always fits a journal line."""
    if isinstance(value, str):
        return preview_text(value)
    if isinstance(value, dict):
        return {k: preview_fields(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        kept = [preview_fields(v) for v in value[:PREVIEW_ITEMS]]
        if len(value) > PREVIEW_ITEMS:
            kept.append(f"... [{len(value) - PREVIEW_ITEMS} more items cut]")
        return kept
    return value


def record_event(
    events_file: Path,
    instance: str,
    event: str,
    *,
    fsync: bool = False,
    wait_s: float | None = None,
    ident: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Append one lifecycle event (every field a bounded preview) and return it. With
    `wait_s`, a journal locked longer than that raises LockBusy instead of waiting.
    `ident`: the record's id, chosen by a caller that may repeat the append (see
    `has_event`)."""
    record = {
        "id": ident or new_id(),
        "ts": now_iso(),
        "event": event,
        "run_instance_id": instance,
    }
    record.update(preview_fields(fields))
    append_jsonl(events_file, record, fsync=fsync, compactor=LOG, wait_s=wait_s)
    return record


def record_advisory(events_file: Path, instance: str, event: str, **fields: Any) -> None:
    """`record_event` for a line nothing depends on (a signal noted): a disk that takes
    nothing more (runtime.core.errors.TRANSIENT) skips it, and what it notes goes on."""
    from runtime.core.errors import TRANSIENT, ActorsError, os_errno

    try:
        record_event(events_file, instance, event, **fields)
    except ActorsError as exc:
        if os_errno(exc) not in TRANSIENT:
            raise


def has_event(events_file: Path, ident: str) -> bool:
    """Whether the event `ident` is among the journal's last records: a repeated append
    (its first try failed only at the fsync, the line already written) is not doubled."""
    from runtime.store.reads import tail_jsonl

    return any(e.get("id") == ident for e in tail_jsonl(events_file, 20))


def write_progress(progress_file: Path, instance: str, **fields: Any) -> None:
    """Replace progress.json (atomic; fsync only for terminal phases)."""
    record = {"run_instance_id": instance, "updated_at": now_iso(), **fields}
    terminal = fields.get("phase") in ("done", "failed", "cancelled", "killed", "exited", "skipped")
    write_json_atomic(progress_file, record, fsync=terminal)

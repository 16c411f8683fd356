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

TERMINAL_EVENTS = {"run.done", "run.failed", "run.cancelled", "run.killed", "run.exited"}
STOP_EVENTS = {"run.kill": "killed", "run.cancel": "cancelled"}


def record_event(
    events_file: Path, instance: str, event: str, *, fsync: bool = False, **fields: Any
) -> dict[str, Any]:
    """Append one lifecycle event and return it."""
    record = {"id": new_id(), "ts": now_iso(), "event": event, "run_instance_id": instance}
    record.update(fields)
    append_jsonl(events_file, record, fsync=fsync, compactor=LOG)
    return record


def write_progress(progress_file: Path, instance: str, **fields: Any) -> None:
    """Replace progress.json (atomic; fsync only for terminal phases)."""
    record = {"run_instance_id": instance, "updated_at": now_iso(), **fields}
    terminal = fields.get("phase") in ("done", "failed", "cancelled", "killed", "exited")
    write_json_atomic(progress_file, record, fsync=terminal)

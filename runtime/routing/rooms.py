"""A run's room timeline: `room:<run>` messages, posted from outside (`send`) or by the run
itself (`emit`). Its own module because both the router and the in-run side post here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.core.ids import now_iso
from runtime.messaging.doorbells import ring
from runtime.store.appends import append_jsonl
from runtime.store.journals import LOG
from runtime.store.layout import RunPaths
from runtime.store.writes import ensure_dir

if TYPE_CHECKING:
    from runtime.messaging.envelope import Envelope
    from runtime.routing.outcomes import SendOutcome
    from runtime.store.records import RunRecord


def post_room(paths: RunPaths, run: RunRecord, envelope: Envelope) -> SendOutcome:
    """Append to the timeline (fsync'd: a room is a record) and wake its watchers."""
    ensure_dir(paths.room)
    append_jsonl(
        paths.room_timeline,
        {**envelope, "received_at": now_iso(), "run_instance_id": run["run_instance_id"]},
        fsync=True,
        compactor=LOG,
    )
    ring(paths.room_doorbells)
    return {
        "to": envelope["to"],
        "type": envelope["type"],
        "id": envelope["id"],
        "state": "posted",
        "route": "room",
    }

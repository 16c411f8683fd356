"""Terminal transition -> follow-up durable in the coordinator's inbox (file adapter).

Measured from the runner's own clock: result.json's `ended_at` (written as the run ends)
to the session inbox entry's `queued_at` (written after the fsync'd append). Both are
wall-clock timestamps with millisecond resolution, taken on this machine.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from bench._stats import emit, register_session, row


def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        import actors
        from runtime.core.ids import parse_iso
        from runtime.core.process import wait_gone
        from runtime.delivery.sessions import SessionInbox
        from runtime.store.layout import StateRoot, session_paths

        register_session("file", "bench")
        root = StateRoot.from_env()
        samples = []
        for _ in range(15 if quick else 60):
            record = actors.spawn(template="true", session="bench")
            actors.wait(record["run"], timeout=60)
            wait_gone([int(record["pid"])], timeout=60)
            result = actors.result(record["run"])
            entry = next(
                e
                for e in SessionInbox(session_paths(root, "bench")).entries()
                if e["envelope"]["body"]["run"] == record["run"]
            )
            samples.append((parse_iso(entry["queued_at"]) - parse_iso(result["ended_at"])) * 1000)
        emit(row("run end -> follow-up durable in inbox (file)", samples))


if __name__ == "__main__":
    main("--quick" in sys.argv)

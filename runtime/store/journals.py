"""Journal caps: every JSONL journal of a run stays within a byte cap.

A journal that passes its cap is rewritten by the writer that passed it, under the
journal's own flock (so no append is lost or interleaved), atomically (temp file, fsync,
rename), with one marker line first: `{"compaction": {...}}` saying when, how much was
dropped this time and in total, and how big the journal was before and after. Readers
never see the marker as a record (`JsonlChunk.compaction` carries it), and incremental
readers notice the replaced file (its inode and the marker's generation) and fold it
again from the start.

Two kinds of journal:
- a *log* (events, outbox, wake, room timeline) keeps its newest lines: at most half
  the cap and at most `LOG_KEEP_LINES` lines;
- a *state* journal (a mailbox's inbox) is folded by id: every entry still open
  (queued, sending, claimed) is kept whole, as one line of its current state, plus the
  newest settled entries (at most `SETTLED_KEEP`, within a quarter of the cap). Nothing
  anyone may still act on is dropped, so an inbox holding more unread messages than a
  quarter of the cap can exceed the cap: it is then compacted again once it has grown
  by half of what it could not drop (the unread bytes, `open_bytes` in the marker), so
  the work of each compaction stays in proportion to the appends that paid for it, and
  the journal shrinks back under the cap as the backlog is handled.

The cap is `$ACTORS_JOURNAL_CAP_BYTES` (default 4 MiB), read once per process.
"""

from __future__ import annotations

import os
from typing import Any

from runtime.core import config
from runtime.core.ids import now_iso
from runtime.store.appends import encode_line
from runtime.store.reads import fold, marker_of, parse_lines

CAP_BYTES = config.byte_count(config.JOURNAL_CAP_BYTES)
LOG_KEEP_LINES = 5000
SETTLED_KEEP = 1000
OPEN_STATES = frozenset({"queued", "sending", "claimed"})
_HEAD_BYTES = 1024


def _marker(
    kind: str, before: int, after: int, dropped: int, previous: dict[str, Any], **extra: int
) -> bytes:
    total = previous.get("dropped_total", 0)
    generation = previous.get("generation", 0)
    return encode_line(
        {
            "compaction": {
                "at": now_iso(),
                "journal": kind,
                "generation": (generation if isinstance(generation, int) else 0) + 1,
                "dropped": dropped,
                "dropped_total": (total if isinstance(total, int) else 0) + dropped,
                "bytes_before": before,
                "bytes_after": after,
                **extra,
            }
        }
    )


def _int(marker: dict[str, Any], key: str) -> int:
    value = marker.get(key, 0)
    return value if isinstance(value, int) and value >= 0 else 0


class _Capped:
    def __init__(self, cap: int) -> None:
        self.cap = cap

    def due(self, fd: int, end: int) -> bool:
        """Past the cap, and grown since the last compaction by half the cap or by half
        of what it could not drop then (unread entries), whichever is more: the work of
        a compaction is thus paid for by the appends before it."""
        if end <= self.cap:
            return False
        previous = marker_of(os.pread(fd, _HEAD_BYTES, 0))
        if not previous:
            return True
        grown = end - _int(previous, "bytes_after")
        return grown >= max(self.cap // 2, _int(previous, "open_bytes") // 2)


class LogCompactor(_Capped):
    """Keep the newest lines of a log (half the cap, `LOG_KEEP_LINES` at most)."""

    def __init__(self, cap: int, keep_lines: int = LOG_KEEP_LINES) -> None:
        super().__init__(cap)
        self.keep_lines = keep_lines

    def rewrite(self, data: bytes) -> bytes:
        previous = marker_of(data)
        lines = data.splitlines(keepends=True)
        if previous:
            lines = lines[1:]
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"  # a torn tail stays a line of its own (readers skip it)
        kept: list[bytes] = []
        size = 0
        for line in reversed(lines):
            if len(kept) >= self.keep_lines or size + len(line) > self.cap // 2:
                break
            kept.append(line)
            size += len(line)
        kept.reverse()
        body = b"".join(kept)
        return _marker("log", len(data), len(body), len(lines) - len(kept), previous) + body


class StateCompactor(_Capped):
    """Fold a mailbox journal by id: open entries whole, the newest settled ones after.

    The same policy serves any journal of entries folded by a key with a state (a
    host's outbox: by `key`, open while `queued`, an entry being a line with `body`)."""

    def __init__(
        self,
        cap: int,
        settled_keep: int = SETTLED_KEEP,
        *,
        key: str = "id",
        open_states: frozenset[str] = OPEN_STATES,
        entry_field: str = "envelope",
    ) -> None:
        super().__init__(cap)
        self.settled_keep = settled_keep
        self.key = key
        self.open_states = open_states
        self.entry_field = entry_field
        """A folded entry without this field is no whole entry (damage): not kept."""

    def rewrite(self, data: bytes) -> bytes:
        previous = marker_of(data)
        records: list[dict[str, Any]] = []
        single: dict[str, bytes | None] = {}  # id -> its line while it has only one
        for raw, value in parse_lines(data):
            if not isinstance(value, dict):
                continue  # (the old marker has no id: fold ignores it)
            records.append(value)
            ident = value.get(self.key)
            if isinstance(ident, str):
                single[ident] = raw + b"\n" if ident not in single else None
        entries = [e for e in fold(records, key=self.key).values() if self._whole(e)]

        def line_of(entry: dict[str, Any]) -> bytes:
            # an entry never touched since it arrived keeps its line: no encoding again
            return single.get(entry[self.key]) or encode_line(entry)

        settled_budget = self.cap // 4
        keep_settled: dict[int, bytes] = {}
        size = 0
        for position in range(len(entries) - 1, -1, -1):
            entry = entries[position]
            if entry.get("state") in self.open_states:
                continue
            line = line_of(entry)
            if len(keep_settled) >= self.settled_keep or size + len(line) > settled_budget:
                break
            keep_settled[position] = line
            size += len(line)
        kept = []
        open_bytes = 0
        for position, entry in enumerate(entries):
            if entry.get("state") in self.open_states:
                kept.append(line_of(entry))
                open_bytes += len(kept[-1])
            elif position in keep_settled:
                kept.append(keep_settled[position])
        body = b"".join(kept)
        dropped = len(entries) - len(kept)
        return (
            _marker("state", len(data), len(body), dropped, previous, open_bytes=open_bytes) + body
        )

    def _whole(self, entry: dict[str, Any]) -> bool:
        if self.entry_field == "envelope":
            return isinstance(entry.get("envelope"), dict)
        return self.entry_field in entry


class SinceCompactor(_Capped):
    """Keep a journal of receipts (lines naming a `key`) from the first receipt of key
    `since` on; all of it when there is none. The writer knows everything before that
    line is settled for good: a host's receipts of messages, `since` being the first
    message of the coordinator's channel, the oldest it still holds unanswered (it sends
    every one it holds, in the order they were queued, and never again one whose answer
    it recorded): a receipt before it is of a message the coordinator will never send
    again, and every receipt a message it may still send again is kept
    (runtime.hosts.outbox.receive)."""

    def __init__(self, cap: int, since: str, key: str = "key") -> None:
        super().__init__(cap)
        self.since = since
        self.key = key

    def rewrite(self, data: bytes) -> bytes:
        previous = marker_of(data)
        lines = [
            (raw, value)
            for raw, value in parse_lines(data)
            if not (isinstance(value, dict) and "compaction" in value and self.key not in value)
        ]
        start = next(
            (
                i
                for i, (_, v) in enumerate(lines)
                if isinstance(v, dict) and v.get(self.key) == self.since
            ),
            0,
        )
        body = b"".join(raw + b"\n" for raw, _ in lines[start:])
        # what could not be dropped counts as open: compacted again only once the
        # journal grew by half of it (`_Capped.due`), not at every append past the cap
        return _marker("since", len(data), len(body), start, previous, open_bytes=len(body)) + body


LOG = LogCompactor(CAP_BYTES)
"""The compactor of events.jsonl, outbox.jsonl, wake.jsonl and room timelines."""
INBOX = StateCompactor(CAP_BYTES)
"""The compactor of run and branch inboxes."""
HOST_OUTBOX = StateCompactor(
    CAP_BYTES, key="key", open_states=frozenset({"queued"}), entry_field="body"
)
"""The compactor of a host's outbox here (runtime.hosts.outbox): every message not yet
answered by the host kept whole, the newest answered ones after."""


def host_receipts(since: str) -> SinceCompactor:
    """The compactor of a host's receipts there, for a channel whose first message is
    `since` (runtime.hosts.outbox.receive)."""
    return SinceCompactor(CAP_BYTES, since)

"""The bounded end of a file: what a foreground tool run shows, and a failure's last lines.

Whole lines only, at most a line and byte budget, so a huge or newline-free file never
costs more than the budget to show.
"""

from __future__ import annotations

from pathlib import Path

from runtime.store import safe
from runtime.store.reads import read_bytes

OUTPUT_MAX_LINES = 200
OUTPUT_MAX_BYTES = 64 * 1024


def bounded_tail(
    path: Path | None, *, max_lines: int = OUTPUT_MAX_LINES, max_bytes: int = OUTPUT_MAX_BYTES
) -> tuple[str, bool, int]:
    """`(text, cut, total_bytes)`: the end of a file, at most `max_lines` lines and
    `max_bytes` bytes (whole lines only when it was cut)."""
    if path is None:
        return "", False, 0
    try:
        size = safe.lstat(path).st_size
    except OSError:
        return "", False, 0
    start = max(0, size - max_bytes)
    data = read_bytes(path, offset=start, limit=size - start)
    cut = start > 0
    if cut:
        newline = data.find(b"\n")
        data = data[newline + 1 :] if newline >= 0 else b""
    lines = data.splitlines(keepends=True)
    if len(lines) > max_lines:
        lines, cut = lines[-max_lines:], True
    return b"".join(lines).decode("utf-8", errors="replace"), cut, size

"""`/metrics` on a big state root: scrape time against reading the run index alone.

The baseline is `list_runs` (what `actors ls` reads: index.json and one stat per run),
measured interleaved with each scrape on the same root, so a busy machine slows both.
Three scrapes, each `render_metrics` (the text included):
- warm: the dashboard's case, a scrape after a scrape in the same process (session
  journals folded incrementally, finished runs' heads in cache/metrics.json);
- new process: `actors metrics`'s case (the session journals read whole; the heads still
  cached);
- first: no cache/metrics.json yet (every run's events head read once).
The roots are built by bench/_fixtures.py (three real runs, cloned).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench._fixtures import build_state_root
from bench._stats import emit, row


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _measure(root_dir: Path, runs: int, repeats: int) -> None:
    from actors.dashboard.metrics import render_metrics
    from runtime.store.layout import StateRoot
    from runtime.views import tally
    from runtime.views.index import list_runs

    root = StateRoot(root_dir)

    def fresh_process() -> None:
        tally._SESSIONS.clear()  # what a new process starts without

    def first() -> None:
        fresh_process()
        if root.metrics_cache.exists():
            os.unlink(root.metrics_cache)

    render_metrics(root)  # settle index.json and cache/metrics.json
    for name, prepare in (("warm", None), ("new process", fresh_process), ("first", first)):
        base, samples = [], []
        for _ in range(repeats):
            base.append(_timed(lambda: list_runs(root)))
            if prepare is not None:
                prepare()
            samples.append(_timed(lambda: render_metrics(root)))
        emit(row(f"/metrics scrape, {runs:,} runs ({name})", samples, base))


def main(quick: bool) -> None:
    sizes = (1000,) if quick else (1000, 10000)
    for runs in sizes:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            root_dir = Path(tmp) / "state"
            started = time.monotonic()
            build_state_root(root_dir, runs)
            emit(f"{f'  (built {runs:,} runs in':<44} {time.monotonic() - started:.1f} s)")
            _measure(root_dir, runs, 5 if runs >= 10000 else 15)


if __name__ == "__main__":
    main("--quick" in sys.argv)

"""The dashboard's watcher on a real directory tree: which runs a file event touched."""

from __future__ import annotations

import os
import select
from pathlib import Path

from actors.dashboard.watch import Batch, StateWatch
from runtime.core.inotify import Inotify


def settle(inotify: Inotify, watch: StateWatch, timeout: float = 10) -> Batch:
    """The events queued once the descriptor is readable (a kernel wake-up, no sleep)."""
    ready, _, _ = select.select([inotify.fd], [], [], timeout)
    assert ready, "no inotify event"
    return watch.apply(inotify.read())


def test_a_run_renamed_in_whole_is_watched_to_its_room(tmp_path: Path) -> None:
    runs, sessions, stage = tmp_path / "runs", tmp_path / "sessions", tmp_path / "tmp"
    for place in (runs, sessions, stage):
        place.mkdir()
    with Inotify() as inotify:
        watch = StateWatch(inotify, str(runs), str(sessions))
        watch.start()
        (stage / "r1" / "rooms" / "main").mkdir(parents=True)
        (stage / "r1" / "doorbells").mkdir()
        os.rename(stage / "r1", runs / "r1")  # as spawn publishes a run
        assert settle(inotify, watch).touched == {"r1"}

        with open(runs / "r1" / "rooms" / "main" / "messages.jsonl", "a") as timeline:
            timeline.write("{}\n")
        assert settle(inotify, watch).touched == {"r1"}

        (runs / "r1" / ".index.lock").write_text("")
        (sessions / "s1").mkdir()
        batch = settle(inotify, watch)
        assert batch.sessions and batch.touched == set()

        (runs / "r1" / "doorbells" / "x.fifo").write_text("")  # not watched
        (sessions / "s1" / "deliveries.jsonl").write_text("{}\n")
        batch = settle(inotify, watch)
        assert batch.touched == set() and batch.sessions

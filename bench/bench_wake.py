"""Wake latency: a run ends -> the idle harness's model gets its next request.

Each sample spawns a `true` run owned by a session of a real harness (started by the
peers tier's helpers against the fake model on 127.0.0.1) and times from the run's
`ended_at` to the fake model's receipt of the request that carries the run's follow-up:
the whole path a user waits on (runner exit, follow-up, delivery, the harness turning it
into a model turn). The baseline, from the same process, is the same run-end -> the
`delivered` record of a `file` session (actors' own part only). After each sample the
next waits until the delivery is journaled done, so every wake finds the harness idle;
the first sample of each harness warms it and is dropped. Gemini CLI and Cursor have no
idle wake (follow-ups ride on the next turn's end), so they have no row. Needs
`make peers`; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bench._stats import emit, percentile, register_session, row

if TYPE_CHECKING:
    from tests.peers.fake_llm import FakeLLM

DEADLINE_S = 60.0


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _delivered_at(session: str, delivery: str, deadline: float) -> float:
    """When the session's journal says the delivery was done (polled: the journal is
    written by the run's runner, a process we share nothing with but the file)."""
    from runtime.store.layout import StateRoot, session_paths

    path = session_paths(StateRoot.from_env(), session).deliveries
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            record = json.loads(line)
            if record["id"] == delivery and record["event"] == "delivered":
                return _epoch(record["ts"])
        time.sleep(0.005)
    raise TimeoutError(f"{session}: {delivery} was not delivered in {DEADLINE_S:.0f}s")


def _sample(session: str, llm: FakeLLM | None) -> float:
    """ms from one run's end to the model request carrying its follow-up (no model: to
    the delivery record); returns once the delivery is journaled, the harness idle."""
    import actors

    record = actors.spawn(template="true", session=session)
    start = len(llm.requests) if llm else 0
    ended = _epoch(str(actors.wait(record["run"], timeout=DEADLINE_S)["ended_at"]))
    deadline = time.monotonic() + DEADLINE_S
    delivered = _delivered_at(session, f"{record['run_instance_id']}:terminal", deadline)
    if llm is None:
        return (delivered - ended) * 1000
    run = str(record["run"])
    request = llm.wait_request(lambda r: run in json.dumps(r["body"]), start, timeout=DEADLINE_S)
    return (float(request["ts"]) - ended) * 1000


def _samples(session: str, count: int, llm: FakeLLM | None) -> list[float]:
    return [_sample(session, llm) for _ in range(count + 1)][1:]  # the first warms


def _claude_samples(base: Path, llm: FakeLLM, count: int) -> list[float]:
    """Claude Code registers its own session (SessionStart hook of `actors install`) and
    is woken by its file watcher; after each wake, its turn ends and the inbox is read,
    so the next run's follow-up finds it idle again."""
    from runtime.delivery.sessions import SessionInbox
    from runtime.store.layout import StateRoot, session_paths
    from tests.peers.conftest import peer_bin
    from tests.peers.run_claude import claude_session

    root = StateRoot.from_env()
    with claude_session(peer_bin("claude"), llm.port, root.path, base) as claude:
        claude.send_user("hello TOKEN-WARM")
        session = str(claude.next_result(timeout=90)["session_id"])
        out = []
        for _ in range(count + 1):
            mark = claude.mark()
            out.append(_sample(session, llm))
            claude.next_result(timeout=DEADLINE_S, after=mark)
            SessionInbox(session_paths(root, session)).drain()
    return out[1:]


def _report(harness: str, samples: list[float], baseline: list[float] | None) -> None:
    """One JSON line per harness for docs/adapters.md's level table, when
    ACTORS_WAKE_REPORT names a file (scripts/adapters_report.py sets it)."""
    target = os.environ.get("ACTORS_WAKE_REPORT")
    if not target:
        return
    line = {
        "harness": harness,
        "n": len(samples),
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 99),
        "baseline_median_ms": statistics.median(baseline) if baseline else None,
    }
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def main(quick: bool) -> None:
    from bench.bench_harness import HARNESSES
    from tests.peers.conftest import PEERS_BIN
    from tests.peers.fake_llm import FakeLLM

    if not PEERS_BIN.exists():
        emit("wake latency: skipped (run `make peers` to install the harnesses)")
        return
    count = 5 if quick else 20
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        llm = FakeLLM()
        llm.start()
        try:
            register_session("file", "wake-file")
            baseline = _samples("wake-file", count, None)
            emit(row("run end -> follow-up delivered (file baseline)", baseline))
            _report("file", baseline, None)
            for name, launch in HARNESSES.items():
                with launch(Path(tmp) / name, llm.port) as options:
                    register_session(name, f"wake-{name}", **options)
                    samples = _samples(f"wake-{name}", count, llm)
                emit(row(f"run end -> model request ({name})", samples, baseline))
                _report(name, samples, baseline)
            samples = _claude_samples(Path(tmp) / "claude", llm, count)
            emit(row("run end -> model request (claude_code)", samples, baseline))
            _report("claude_code", samples, baseline)
        finally:
            llm.stop()


if __name__ == "__main__":
    main("--quick" in sys.argv)

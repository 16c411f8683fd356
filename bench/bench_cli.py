"""`actors emit` from inside a run, and tmux wake-to-injected for a follow-up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, register_session, row

EMITTER = """\
import json, subprocess, sys, time
n, out = int(sys.argv[1]), sys.argv[2]
base, wall = [], []
for i in range(n):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    base.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "actors", "emit", "progress.tick", str(i)], check=True)
    wall.append((time.perf_counter() - t0) * 1000)
with open(out, "w") as f:
    json.dump({"base": base, "wall": wall}, f)
"""
"""Times `actors emit` where it is meant to run: in a run's command, with the run's own
token in its environment (the state directory holds only a verifier of it)."""


def main(quick: bool) -> None:
    n = 20 if quick else 100
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        import actors

        script, out = Path(tmp) / "emitter.py", Path(tmp) / "emitted.json"
        script.write_text(EMITTER)
        record = actors.spawn(
            template=f"{sys.executable} {{script}} {{n}} {{out}}",
            values={"script": str(script), "n": str(n), "out": str(out)},
        )
        ended = actors.wait(record["run"], timeout=600)
        if ended["status"] != "done":
            raise SystemExit(f"bench_cli: the emitting run ended {ended['status']}")
        timed = json.loads(out.read_text())
        emit(row("actors emit (CLI, inside a run) wall", timed["wall"], timed["base"]))

        if shutil.which("tmux") is None:
            emit("tmux wake-to-injected: skipped (tmux not installed)")
            return
        socket = f"actors-bench-{os.getpid()}"
        os.environ["TMUX_TMPDIR"] = tmp
        subprocess.run(
            [
                "tmux",
                "-L",
                socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "agent",
                "-x",
                "200",
                "-y",
                "50",
                "cat",
            ],
            check=True,
        )
        try:
            register_session("tmux", "tm", socket=socket, target="agent:0.0", enter_delay="0.15")
            from runtime.core.ids import new_id
            from runtime.delivery.engine import DeliveryRunner
            from runtime.store.layout import StateRoot

            runner = DeliveryRunner(StateRoot.from_env())
            samples = []
            for i in range(5 if quick else 20):
                env_id = new_id()
                t0 = time.perf_counter()
                state = runner.submit(
                    "tm",
                    {"id": env_id, "type": "note", "summary": f"bench {i}"},
                    delivery_id=env_id,
                )
                assert state.get("state") == "delivered", state
                samples.append((time.perf_counter() - t0) * 1000)
            emit(row("tmux follow-up: submit -> injected (seen)", samples))
            emit("  (includes the 150 ms Enter delay the Ink-based TUIs need)")
        finally:
            subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)


if __name__ == "__main__":
    main("--quick" in sys.argv)

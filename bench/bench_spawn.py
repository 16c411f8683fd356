"""`actors spawn` wall time and the idle runner's memory and CPU.

Baseline: `python -c pass` started the same way in the same run (interpreter start-up is
the floor any Python CLI pays).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, idle_cpu, row

PY = sys.executable


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main(quick: bool) -> None:
    n = 15 if quick else 60
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, ACTORS_HOME=home)
        cli = [PY, "-m", "actors"]
        subprocess.run(
            [*cli, "spawn", "-t", "true", "--wait"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # the keep offer (for an agent) is no figure
        )  # warm the recipe compile cache
        base = [_timed([PY, "-c", "pass"], env) for _ in range(n)]
        spawn = []
        for _ in range(n):
            # Measured on a quiet machine: the previous run (whose runner start-up would
            # compete for the 2 cores) is waited for outside the timed section.
            spawn.append(_timed([*cli, "spawn", "-t", "true", "--as", f"run:s{len(spawn)}"], env))
            subprocess.run(
                [*cli, "wait", f"s{len(spawn) - 1}"], env=env, check=True, stdout=subprocess.DEVNULL
            )
        emit(row("actors spawn (cached recipe) wall", spawn, base))
        # time until the runner has recorded run.runner.start, measured from before spawn
        starts = []
        for _ in range(max(5, n // 3)):
            t0 = time.time()
            out = subprocess.run(
                [*cli, "spawn", "-t", "true", "--json"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            state = Path(json.loads(out)["state_dir"])
            while True:
                lines = (state / "events.jsonl").read_text().splitlines()
                found = [json.loads(x) for x in lines if '"run.runner.start"' in x]
                if found:
                    ts = found[0]["ts"]
                    from runtime.core.ids import parse_iso

                    starts.append((parse_iso(ts) - t0) * 1000)
                    break
                time.sleep(0.002)
            subprocess.run(
                [*cli, "wait", state.name], env=env, check=True, stdout=subprocess.DEVNULL
            )
        emit(row("spawn -> run.runner.start recorded", starts))
        out = subprocess.run(
            [*cli, "spawn", "ticker", "-v", "interval=3600", "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        pid = json.loads(out)["pid"]
        time.sleep(1.0)
        idle = idle_cpu([pid], 3.0 if quick else 30.0)
        emit(
            f"{'idle runner resident memory':<44} {_rss_kb(pid) / 1024:.1f} MB   "
            f"CPU while idle {idle}"
        )
        subprocess.run(
            [*cli, "kill", json.loads(out)["run"]], env=env, check=True, stdout=subprocess.DEVNULL
        )


if __name__ == "__main__":
    main("--quick" in sys.argv)

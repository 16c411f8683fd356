"""CLI start-up: each hot command's wall time as a ratio to `python -c pass`, in one run.

The commands are run in turn (baseline, then each command, round after round), so a drift
in the machine's speed hits every figure alike; the printed ratio is of the medians.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, row


def _timed(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, input=stdin)
    return (time.perf_counter() - started) * 1000


def main(quick: bool) -> None:
    rounds = 10 if quick else 40
    actors = [sys.executable, "-m", "actors"]
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        env = dict(os.environ, ACTORS_HOME=str(Path(tmp) / "state"))
        env.pop("ACTORS_SESSION", None)
        idle = subprocess.run(
            [*actors, "spawn", "-t", "sleep 600", "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        import json

        run = json.loads(idle.stdout)["run"]
        # a status line's run: its session is named by the harness's JSON on stdin
        line_run = subprocess.run(
            [*actors, "spawn", "-t", "sleep 600", "--session", "bench-line", "--json"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        status_input = {"actors status --line --stdin": b'{"session_id": "bench-line"}'}
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "actors --version": [*actors, "--version"],
            "actors message": [*actors, "message", f"run:{run}", "note", "hi", "--force"],
            "actors status": [*actors, "status", run],
            "actors status --line --stdin": [*actors, "status", "--line", "--stdin"],
            "actors spawn": [*actors, "spawn", "-t", "true"],
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        samples["actors kill"] = []
        for _ in range(rounds):
            for name, argv in commands.items():
                samples[name].append(_timed(argv, env, status_input.get(name)))
            victim = subprocess.run(
                [*actors, "spawn", "-t", "sleep 600", "--json"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            victim_run = json.loads(victim.stdout)["run"]
            samples["actors kill"].append(_timed([*actors, "kill", victim_run], env))
        for stop in (run, json.loads(line_run.stdout)["run"]):
            subprocess.run([*actors, "kill", stop], env=env, check=False, capture_output=True)
        base = samples.pop("python -c pass")
        emit(row("python -c pass (baseline)", base))
        for name, values in samples.items():
            emit(row(f"{name} (CLI start-up) wall", values, base))


if __name__ == "__main__":
    main("--quick" in sys.argv)

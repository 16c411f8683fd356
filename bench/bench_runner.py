"""What one run's runner costs: CPU from spawn to ready, alone and in a burst
of back-to-back spawns, and the PSS of an idle run beside a bare interpreter and a
process that only imports trio, all in the same run.

"Ready" is the lean runner parked (its idle image, ACTORS_RUNNER_STATE=wait) or, for the
trio runner (ACTORS_TRIO_RUNNER=1), the graph's command started and a second passed.
CPU is utime + stime of the runner process (/proc/PID/stat), which adds up across its
exec()s. Every process started here is killed on exit, even on failure.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, row

PY = sys.executable
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _parked(pid: int) -> bool:
    try:
        return b"ACTORS_RUNNER_STATE=wait" in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _ready(pid: int, lean: bool, deadline_s: float = 30.0) -> None:
    if not lean:
        time.sleep(1.0)
        return
    until = time.monotonic() + deadline_s
    while not _parked(pid):
        if time.monotonic() > until:
            raise RuntimeError(f"runner {pid} did not park within {deadline_s} s")
        time.sleep(0.01)


class Runs:
    """Spawned runs, every one killed on exit."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env, self.pids = env, []

    def spawn(self) -> tuple[int, float]:
        started = time.perf_counter()
        out = subprocess.run(
            [PY, "-m", "actors", "spawn", "-t", "sleep 100000", "--json"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wall = (time.perf_counter() - started) * 1000
        pid = int(json.loads(out)["pid"])
        self.pids.append(pid)
        return pid, wall

    def kill_all(self) -> None:
        for pid in self.pids:
            try:
                os.killpg(pid, 9)
            except OSError:
                pass
        self.pids.clear()


def _bare_cpu(count: int) -> list[float]:
    """CPU of `python -P -c pass` (rusage of the reaped child), the floor of any start."""
    import resource

    samples = []
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([PY, "-P", "-c", "pass"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        samples.append(spent * 1000)
    return samples


def _idle_processes(code: str, count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([PY, "-P", "-c", code]) for _ in range(count)]


def _pss_of(procs: list[int]) -> float:
    return statistics.mean(_pss_kb(p) for p in procs) / 1024


def measure(env: dict[str, str], lean: bool, alone: int, burst: int) -> list[int]:
    """Runner CPU alone (each spawn waits for the previous runner to be ready) and in a
    burst (back-to-back); returns the burst's runner pids (left idle for the PSS row)."""
    label = "lean" if lean else "trio"
    runs = Runs(env)
    try:
        cpu_alone, wall_alone = [], []
        for _ in range(alone):
            pid, wall = runs.spawn()
            _ready(pid, lean)
            cpu_alone.append(_cpu_ms(pid))
            wall_alone.append(wall)
        runs.kill_all()
        walls, pids = [], []
        started = time.perf_counter()
        for _ in range(burst):
            pid, wall = runs.spawn()
            walls.append(wall)
            pids.append(pid)
        total = (time.perf_counter() - started) * 1000
        for pid in pids:
            _ready(pid, lean, 120.0)
        cpu_burst = [_cpu_ms(pid) for pid in pids]
        emit(row(f"{label}: runner CPU spawn -> ready, alone", cpu_alone))
        emit(row(f"{label}: runner CPU, {burst} back-to-back", cpu_burst, cpu_alone))
        emit(row(f"{label}: spawn wall, alone", wall_alone))
        emit(row(f"{label}: spawn wall, {burst} back-to-back", walls, wall_alone))
        emit(f"{label}: {burst} back-to-back spawns took {total / burst:.1f} ms per spawn")
        kept, runs.pids = list(runs.pids), []
        return kept
    except BaseException:
        runs.kill_all()
        raise


def main(quick: bool) -> None:
    alone, burst = (5, 20) if quick else (20, 100)
    kept: list[int] = []
    baselines: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, ACTORS_HOME=home)
        env.pop("ACTORS_TRIO_RUNNER", None)
        try:
            subprocess.run(
                [PY, "-m", "actors", "spawn", "-t", "true", "--wait"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )  # warm the recipe compile cache
            emit(row("python -P -c pass CPU (one start's floor)", _bare_cpu(alone)))
            kept = measure(env, True, alone, burst)
            trio_kept = measure(dict(env, ACTORS_TRIO_RUNNER="1"), False, alone, burst // 5)
            kept += trio_kept
            bare = _idle_processes("import time; time.sleep(100000)", burst // 5)
            baselines += bare
            trio = _idle_processes("import time, trio; time.sleep(100000)", burst // 5)
            baselines += trio
            time.sleep(3.0)
            lean_pids = kept[: len(kept) - len(trio_kept)]
            emit(
                f"{'idle PSS per process (MB)':<44} lean runner {_pss_of(lean_pids):.2f}"
                f"  trio runner {_pss_of(trio_kept):.2f}"
                f"  bare interpreter {_pss_of([p.pid for p in bare]):.2f}"
                f"  import trio {_pss_of([p.pid for p in trio]):.2f}"
            )
            cpu0 = [_cpu_ms(p) for p in lean_pids]
            time.sleep(5.0 if quick else 20.0)
            spent = sum(_cpu_ms(p) for p in lean_pids) - sum(cpu0)
            emit(f"{'idle lean runners CPU (all of them)':<44} {spent:.0f} ms of CPU in the window")
        finally:
            for pid in kept:
                try:
                    os.killpg(pid, 9)
                except OSError:
                    pass
            for proc in baselines:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main("--quick" in sys.argv)

"""What one run's runner costs, for every shape of graph: CPU from spawn to ready, alone
and in a burst of back-to-back spawns, the PSS of an idle (parked) runner, and its CPU
while idle, beside a bare interpreter and a process that only imports trio, all in the
same run.

"Ready" is the runner parked (its idle image, ACTORS_RUNNER_STATE=wait): one runner
supervises every recipe and parks whenever it is idle. CPU is utime + stime of the runner
process (/proc/PID/stat), which adds up across its exec()s.

`--compare DIR` also spawns the same graphs with the actors of another checkout (its own
.venv), e.g. one from before the one runner, where a graph ran on trio and never parked:
its rows are printed beside ours, in the same run. Every process started here is killed
on exit, even on failure.
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
SLEEP = "sleep 100000"
GRAPHS: dict[str, dict[str, object]] = {
    "one command": {"template": SLEEP},
    "sequence of 2": {"template": [SLEEP, "true"]},
    "fan-out of 4": {"parallel": True, "template": [SLEEP] * 4},
    "two-worker swarm shape": {
        "parallel": True,
        "template": [{"label": "front", "template": SLEEP}, {"label": "back", "template": SLEEP}],
    },
}


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


def _ready(pid: int, parks: bool, deadline_s: float = 30.0) -> None:
    """Wait until the runner parked; a runner that never parks (a compared tree's trio
    runner) is given a second once its command runs."""
    if not parks:
        time.sleep(1.0)
        return
    until = time.monotonic() + deadline_s
    while not _parked(pid):
        if time.monotonic() > until:
            raise RuntimeError(f"runner {pid} did not park within {deadline_s} s")
        time.sleep(0.01)  # nothing outside the process announces an exec: poll /proc


class Runs:
    """Spawned runs of one actors installation, every one killed on exit."""

    def __init__(self, python: str, env: dict[str, str], recipe: Path) -> None:
        self.python, self.env, self.recipe, self.pids = python, env, recipe, []

    def spawn(self) -> tuple[int, float]:
        started = time.perf_counter()
        out = subprocess.run(
            [self.python, "-P", "-m", "actors", "spawn", str(self.recipe), "--json"],
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
        kill_sessions(self.pids)
        self.pids.clear()


def kill_sessions(runners: list[int]) -> None:
    """SIGKILL every process of each runner's session: the runner leads it, and its
    commands sit in process groups of their own inside it."""
    sids = set(runners)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sids:
            try:
                os.kill(int(name), 9)
            except OSError:
                pass


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


def _pss_of(pids: list[int]) -> float:
    return statistics.mean(_pss_kb(p) for p in pids) / 1024 if pids else 0.0


def measure(label: str, runs: Runs, parks: bool, alone: int, burst: int) -> list[int]:
    """Runner CPU alone (each spawn waits for the previous runner to be ready) and in a
    burst (back-to-back); returns the burst's runner pids (left idle for the PSS row)."""
    try:
        cpu_alone, wall_alone = [], []
        for _ in range(alone):
            pid, wall = runs.spawn()
            _ready(pid, parks)
            cpu_alone.append(_cpu_ms(pid))
            wall_alone.append(wall)
        runs.kill_all()
        walls, pids = [], []
        for _ in range(burst):
            pid, wall = runs.spawn()
            walls.append(wall)
            pids.append(pid)
        for pid in pids:
            _ready(pid, parks, 120.0)
        cpu_burst = [_cpu_ms(pid) for pid in pids]
        emit(row(f"{label}: runner CPU spawn -> ready, alone", cpu_alone))
        emit(row(f"{label}: runner CPU, {burst} back-to-back", cpu_burst, cpu_alone))
        emit(row(f"{label}: spawn wall, alone", wall_alone))
        kept, runs.pids = list(runs.pids), []
        return kept
    except BaseException:
        runs.kill_all()
        raise


def _compare_tree() -> Path | None:
    if "--compare" not in sys.argv:
        return None
    tree = Path(sys.argv[sys.argv.index("--compare") + 1]).resolve()
    if not (tree / ".venv" / "bin" / "python").exists():
        print(f"bench_runner: {tree} has no .venv (run `make setup` there)", file=sys.stderr)
        raise SystemExit(2)
    return tree


def main(quick: bool) -> None:
    alone, burst = (3, 10) if quick else (10, 40)
    compare = _compare_tree()
    kept: list[int] = []
    baselines: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as home:
        work = Path(home)
        env = dict(os.environ, ACTORS_HOME=str(work / "state"))
        try:
            emit(row("python -P -c pass CPU (one start's floor)", _bare_cpu(alone)))
            idle_pids: dict[str, list[int]] = {}
            for name, recipe in GRAPHS.items():
                path = work / f"{name.replace(' ', '-')}.json"
                path.write_text(json.dumps(recipe))
                ours = measure(name, Runs(PY, env, path), True, alone, burst)
                kept += ours
                idle_pids[name] = ours
                if compare is not None:
                    theirs_env = dict(env, ACTORS_HOME=str(work / "compared"))
                    python = str(compare / ".venv" / "bin" / "python")
                    theirs = measure(
                        f"{name} ({compare.name})",
                        Runs(python, theirs_env, path),
                        name == "one command",
                        alone,
                        burst // 4 or 1,
                    )
                    kept += theirs
                    idle_pids[f"{name} ({compare.name})"] = theirs
            bare = _idle_processes("import time; time.sleep(100000)", 5)
            trio = _idle_processes("import time, trio; time.sleep(100000)", 5)
            baselines += bare + trio
            time.sleep(3.0)
            emit(
                f"{'baseline idle PSS (MB)':<44} bare interpreter "
                f"{_pss_of([p.pid for p in bare]):.2f}  import trio "
                f"{_pss_of([p.pid for p in trio]):.2f}"
            )
            for name, pids in idle_pids.items():
                emit(f"{'idle runner PSS (MB), ' + name:<60} {_pss_of(pids):.2f}")
            ours_idle = [p for name, pids in idle_pids.items() if "(" not in name for p in pids]
            cpu0 = sum(_cpu_ms(p) for p in ours_idle)
            window = 5.0 if quick else 20.0
            time.sleep(window)
            spent = sum(_cpu_ms(p) for p in ours_idle) - cpu0
            emit(
                f"{'idle runners CPU, all ' + str(len(ours_idle)):<44} {spent:.0f} ms of CPU "
                f"in {window:.0f} s"
            )
        finally:
            kill_sessions(kept)
            for proc in baselines:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main("--quick" in sys.argv)

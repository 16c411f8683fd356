"""Many idle runs at once: memory, idle CPU, spawn CPU and message wake latency.

`python -m bench.bench_scale [--quick] [--runs N] [--consumers K] [--window S]
[--graph leaf|fanout|swarm]` (`python -m bench scale` keeps a small N: 20 with --quick,
else 100). `--graph` is the shape of every run: one command (the default), a fan-out of
four long commands, or a two-worker swarm whose first worker is the consumer.

N runs are started; K of them (default all, at most 300) run a real consumer (a Python
script asleep in `actors.recv()` that records when it held each message), the others an
idle `sleep` command, so N = 1,000 fits in memory while the wake is still measured with
all N present. Printed, each with the same run's baselines (an idle bare interpreter; an
idle process that only imported trio):

- PSS per run (shared pages split fairly, /proc/PID/smaps_rollup), runner and consumer
  separately, and RSS for comparison;
- spawn: wall time per `actors.spawn`, and the CPU each runner and consumer had used
  once idle (utime + stime ticks from /proc/PID/stat: what starting cost);
- idle CPU of every process of every run over a window, summed, as % of one core;
- message -> held, one message to each consumer 5 ms apart, all N runs present.

Every run it starts is killed on exit, also on an exception, SIGINT (KeyboardInterrupt),
SIGTERM or SIGHUP: `finally`, `atexit` and the signal handlers all end in `_kill_all`,
which kills the session of every run found in the private state root (also one whose
`spawn` was interrupted before it returned).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._stats import emit, percentile, row

CONSUMER = """
import json, sys, time
import actors
with open(sys.argv[1], "a") as out:
    while True:
        entry = actors.recv(ack=False)
        held = time.time()
        out.write(json.dumps({"held": held, "body": entry["envelope"]["body"]}) + "\\n")
        out.flush()
        actors.ack(entry["id"])
"""
HERTZ = os.sysconf("SC_CLK_TCK")
MIN_AVAILABLE_KB = 2 << 20
"""Stop spawning when the machine has less than this much memory available (2 GiB)."""


def _rollup(pid: int) -> dict[str, int]:
    """Pss and Rss (kB) of one process; {} when it is gone."""
    found = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in ("Pss", "Rss"):
                found[key] = int(line.split()[1])
    except OSError:
        return {}
    return found


def _stat(pid: int) -> tuple[int, int] | None:
    """(session id, utime + stime ticks) of a live process; None when gone (or a
    zombie: dead, only not yet reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[3]), int(fields[11]) + int(fields[12])


def _sessions() -> dict[int, list[int]]:
    """Every live process by session id, from one pass over /proc."""
    by_sid: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (found := _stat(int(name))) is not None:
            by_sid.setdefault(found[0], []).append(int(name))
    return by_sid


def _ticks(pids: list[int]) -> int:
    return sum(found[1] for p in pids if (found := _stat(p)) is not None)


def _available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


# -- never leave runs behind ---------------------------------------------------------

_home: list[Path] = []


def _our_sessions() -> set[int]:
    """The runner pid (= session id) of every run in our private state root."""
    sids = set()
    runs = _home[0] / "runs" if _home else None
    for run_json in runs.glob("*/run.json") if runs and runs.is_dir() else []:
        try:
            sids.add(int(json.loads(run_json.read_text())["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    # a runner started by a spawn the signal cut short has no pid in its run.json yet:
    # its argv names its state directory, under our root
    marker = str(_home[0]).encode() if _home else None
    for entry in os.listdir("/proc") if marker else []:
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes():
                    sids.add(os.getsid(int(entry)))
            except OSError:
                continue
    return sids


def _kill_all() -> int:
    """SIGKILL every process of every session of ours until none is left; how many."""
    sids, killed = _our_sessions(), 0
    for _round in range(20):
        members = [p for sid, pids in _sessions().items() if sid in sids for p in pids]
        if not members:
            break
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.05)  # let the kernel reap before the next scan
    _reap()
    return killed


def _reap() -> None:
    """Collect the runners this process started (actors.spawn's children): no zombies."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _on_signal(signum: int, _frame: Any) -> None:
    _kill_all()
    raise SystemExit(128 + signum) if signum != signal.SIGINT else KeyboardInterrupt


def _leftovers() -> int:
    sids = _our_sessions()
    return sum(len(pids) for sid, pids in _sessions().items() if sid in sids)


# -- baselines -----------------------------------------------------------------------


def _baseline(label: str, code: str) -> tuple[str, float, int]:
    """An idle interpreter after `code`: (label, PSS MB, CPU ms it took to get there)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('ready', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(0.3)
        pss = _rollup(proc.pid).get("Pss", 0) / 1024
        cpu = _ticks([proc.pid]) * 1000 // HERTZ
    finally:
        proc.kill()
        proc.communicate()
    return label, pss, cpu


# -- the measurement -----------------------------------------------------------------


def _spawn_all(work: Path, count: int, consumers: int) -> list[tuple[dict[str, Any], Path | None]]:
    import actors

    runs: list[tuple[dict[str, Any], Path | None]] = []
    walls = []
    for i in range(count):
        if i % 50 == 0 and _available_kb() < MIN_AVAILABLE_KB:
            emit(f"  stopped at {i} runs: less than {MIN_AVAILABLE_KB >> 20} GiB available")
            break
        out = work / f"held-{i}.jsonl" if i < consumers else None
        started = time.perf_counter()
        if out is not None:
            record = actors.spawn(
                str(work / "consumer.json"),
                values={"script": str(work / "consumer.py"), "out": str(out)},
            )
        else:
            record = actors.spawn(str(work / "sleeper.json"))
        walls.append((time.perf_counter() - started) * 1000)
        runs.append((dict(record), out))
    emit(row(f"actors.spawn, back to back ({len(runs)} runs)", walls))
    return runs


def _armed(record: dict[str, Any], consumer: bool) -> bool:
    try:
        return len(os.listdir(Path(record["state_dir"]) / "doorbells")) >= (2 if consumer else 1)
    except FileNotFoundError:
        return False


def _wait_idle(runs: list[tuple[dict[str, Any], Path | None]]) -> None:
    deadline = time.monotonic() + 60 + len(runs) * 0.5
    waiting = list(runs)
    while waiting and time.monotonic() < deadline:
        waiting = [(r, o) for r, o in waiting if not _armed(r, o is not None)]
        time.sleep(0.2)
    if waiting:
        emit(f"  {len(waiting)} runs never armed their doorbells")
    # Start-up's tail is not idleness: wait until every runner has parked (exec'd into
    # its idle image, seen in its environment), at most 60 s, then let the rest settle.
    started = time.monotonic()
    pids = [int(record["pid"]) for record, _ in runs]
    while time.monotonic() - started < 60 and not all(_parked(p) for p in pids):
        time.sleep(0.2)
    parked = sum(1 for p in pids if _parked(p))
    emit(
        f"  {parked} of {len(pids)} runners parked {time.monotonic() - started:.1f} s after arming"
    )
    time.sleep(1.0)


def _parked(pid: int) -> bool:
    try:
        return b"ACTORS_RUNNER_STATE=wait " in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _members(runs: list[tuple[dict[str, Any], Path | None]]) -> list[int]:
    sessions = _sessions()
    return [p for record, _ in runs for p in sessions.get(int(record["pid"]), [])]


def _memory(runs: list[tuple[dict[str, Any], Path | None]], sessions: dict[int, list[int]]) -> None:
    runner: list[float] = []
    consumer: list[float] = []
    other: list[float] = []
    rss = 0
    for record, _out in runs:
        pid = int(record["pid"])
        for member in sessions.get(pid, []):
            got = _rollup(member)
            rss += got.get("Rss", 0)
            kind = runner if member == pid else consumer if _is_python(member) else other
            kind.append(got.get("Pss", 0))
    total = (sum(runner) + sum(consumer) + sum(other)) / 1024
    emit(
        f"{len(runs)} idle runs, every process: PSS {total:7.0f} MB  RSS {rss / 1024:7.0f} MB  "
        f"({total / max(1, len(runs)):.1f} MB PSS per run)"
    )
    for label, values in (("runner", runner), ("consumer (recv)", consumer), ("sleep leaf", other)):
        if values:
            emit(
                f"  PSS per {label:<16} n={len(values):<5} median {sorted(values)[len(values) // 2] / 1024:6.2f} MB"
                f"  p99 {percentile(values, 99) / 1024:6.2f} MB"
            )


def _is_python(pid: int) -> bool:
    """A consumer (a Python script in `actors.recv`), not a `sleep` leaf."""
    try:
        return b"python" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return False


def _spawn_cpu(
    runs: list[tuple[dict[str, Any], Path | None]], sessions: dict[int, list[int]]
) -> None:
    runner: list[float] = []
    consumer: list[float] = []
    for record, out in runs:
        pid = int(record["pid"])
        runner.append(_ticks([pid]) * 1000 / HERTZ)
        if out is not None:
            consumer.append(_ticks([p for p in sessions.get(pid, []) if p != pid]) * 1000 / HERTZ)
    emit(row("CPU to idle: runner (spawn -> ready)", runner))
    if consumer:
        emit(row("CPU to idle: consumer leaf (start -> recv)", consumer))


def _idle_cpu(runs: list[tuple[dict[str, Any], Path | None]], window: float) -> None:
    pids = _members(runs)
    before, started = _ticks(pids), time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - started
    ticks = _ticks(pids) - before
    emit(
        f"idle CPU of all {len(runs)} runs ({len(pids)} processes) over {elapsed:.0f} s: "
        f"{ticks} ticks = {ticks / HERTZ / elapsed * 100:.3f}% of a core "
        f"(one tick = {100 / HERTZ / elapsed:.3f}%)"
    )


def _wake(runs: list[tuple[dict[str, Any], Path | None]], *, fsync: bool) -> None:
    """One message to each consumer, 5 ms apart: send -> held (the consumer's clock
    after its claim), and the sender's own `actors.message()` call. With `fsync=False`
    the disk is out of it: what is left is the wake path itself."""
    import actors

    targets = [(record, out) for record, out in runs if out is not None]
    sent, calls = [], []
    for record, _ in targets:
        time.sleep(0.005)
        sent.append(time.time())
        actors.message(f"run:{record['run']}", "wake.up", record["run"], fsync=fsync)
        calls.append((time.time() - sent[-1]) * 1000)
    latency = []
    deadline = time.monotonic() + 60
    for (_record, out), t0 in zip(targets, sent, strict=True):
        assert out is not None
        while len(held := _held(out)) < (2 if not fsync else 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        if len(held) >= (2 if not fsync else 1):
            latency.append((held[-1] - t0) * 1000)
    how = "fsync'd" if fsync else "no fsync"
    if latency:
        emit(row(f"message ({how}) -> held, {len(targets)} consumers, {len(runs)} runs", latency))
        emit(row(f"  of which the actors.message() call ({how})", calls))
    if len(latency) < len(targets):
        emit(f"  {len(targets) - len(latency)} consumers never held their message")


def _held(out: Path) -> list[float]:
    try:
        return [json.loads(line)["held"] for line in out.read_text().splitlines()]
    except (OSError, ValueError):
        return []


GRAPHS = ("leaf", "fanout", "swarm")
"""The shape of every run (`--graph`): one command; a fan-out of 4 long commands; a
two-worker swarm (two branches, each a worker: the consumer, or an idle `sleep`)."""


def _shape(graph: str, worker: str) -> dict[str, Any]:
    """A recipe of the given shape whose (first) worker is `worker`."""
    if graph == "leaf":
        return {"template": worker}
    if graph == "fanout":
        return {"parallel": True, "template": [worker, *["sleep 100000"] * 3]}
    return {
        "parallel": True,
        "template": [
            {"label": "front", "template": worker},
            {"label": "back", "template": "sleep 100000"},
        ],
    }


def _setup(work: Path, graph: str) -> None:
    (work / "consumer.py").write_text(CONSUMER)
    consumer = _shape(graph, f"{sys.executable} {{script}} {{out}}")
    consumer["mailbox"] = {"accepts": ["wake.up"]}
    (work / "consumer.json").write_text(json.dumps(consumer))
    (work / "sleeper.json").write_text(json.dumps(_shape(graph, "sleep 100000")))


def measure(count: int, consumers: int, window: float, graph: str = "leaf") -> None:
    for label, pss, cpu in (
        _baseline("bare interpreter", "pass"),
        _baseline("interpreter + import trio", "import trio"),
    ):
        emit(f"baseline: idle {label:<28} PSS {pss:6.2f} MB  CPU to idle {cpu:4d} ms")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        _home.append(work / "state")
        os.environ["ACTORS_HOME"] = str(_home[0])
        emit(f"state root: {_home[0]} (removed on exit); every run: {graph}")
        _setup(work, graph)
        previous = {
            s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
        }
        atexit.register(_kill_all)
        try:
            runs = _spawn_all(work, count, consumers)
            _wait_idle(runs)
            sessions = _sessions()
            _memory(runs, sessions)
            _spawn_cpu(runs, sessions)
            _idle_cpu(runs, window)
            _wake(runs, fsync=True)
            _wake(runs, fsync=False)
        finally:  # never leave hundreds of idle runners behind, even after a failure
            _kill_all()
            left = _leftovers()
            emit(f"cleanup: {left} processes of these runs left" + ("" if left == 0 else " (BUG)"))
            _home.clear()
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _option(name: str, default: float) -> float:
    if name in sys.argv:
        try:
            return float(sys.argv[sys.argv.index(name) + 1])
        except (IndexError, ValueError):
            print(f"bench_scale: {name} needs a number, e.g. {name} 100", file=sys.stderr)
            raise SystemExit(2) from None
    return default


def main(quick: bool) -> None:
    count = int(_option("--runs", 20 if quick else 100))
    consumers = int(_option("--consumers", min(count, 300)))
    window = _option("--window", 5.0 if quick else 10.0)
    graph = sys.argv[sys.argv.index("--graph") + 1] if "--graph" in sys.argv else "leaf"
    if graph not in GRAPHS:
        print(f"bench_scale: --graph is one of {', '.join(GRAPHS)}", file=sys.stderr)
        raise SystemExit(2)
    measure(count, min(consumers, count), window, graph)


if __name__ == "__main__":
    main("--quick" in sys.argv)

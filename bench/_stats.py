"""Shared helpers: percentiles, machine facts, and one printed row per measurement."""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine() -> str:
    return (
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def row(
    name: str, samples: list[float], baseline: list[float] | None = None, unit: str = "ms"
) -> str:
    med, p99, top = statistics.median(samples), percentile(samples, 99), max(samples)
    text = (
        f"{name:<44} n={len(samples):<4} median {med:8.2f} {unit}  p99 {p99:8.2f}  max {top:8.2f}"
    )
    if baseline:
        base = statistics.median(baseline)
        if base > med:
            text += f"   baseline median {base:7.2f} -> {base / med:6.1f}x faster"
        else:
            text += f"   baseline median {base:7.2f} -> ratio {med / base:5.2f}x"
    return text


def emit(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()


def register_session(harness: str, ident: str, **options: str) -> None:
    """`actors session register` through the real CLI, as a user would."""
    import subprocess

    args = [item for key, value in options.items() for item in ("-o", f"{key}={value}")]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "actors",
            "session",
            "register",
            "--harness",
            harness,
            "--id",
            ident,
            *args,
        ],
        check=False,
        capture_output=True,  # its `export ACTORS_SESSION=...` advice is for a person
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"bench: session register {ident}: {out.stderr.strip()}")


def idle_cpu(pids: list[int], seconds: float) -> str:
    """CPU used by `pids` over `seconds`, as a share of one core, with its resolution.

    Linux counts process CPU in clock ticks (10 ms here; this kernel keeps no schedstat
    nanoseconds), so an idle process shows 0 or 1 tick per window: the resolution is
    printed so a 0.1 % reading from a 10 s window reads as the one tick it is.
    """
    hertz = os.sysconf("SC_CLK_TCK")

    def ticks() -> int:
        total = 0
        for pid in pids:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total

    before, started = ticks(), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    share = (ticks() - before) / hertz / elapsed
    return f"{share * 100:.3f}% of a core (one tick = {100 / hertz / elapsed:.3f}%)"

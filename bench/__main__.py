"""`python -m bench [--quick] [NAME ...]`: run the benchmarks and print their figures.

Without NAME every benchmark runs, in the order below; with names (`spawn`, `message`,
... or their module names, `bench_spawn`), only those. Each module also runs alone:
`python -m bench.bench_spawn [--quick]`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from bench import (
    bench_cli,
    bench_control,
    bench_dashboard,
    bench_followup,
    bench_groups,
    bench_harness,
    bench_hosts,
    bench_inbox_wait,
    bench_message,
    bench_metrics,
    bench_runner,
    bench_scale,
    bench_spawn,
    bench_startup,
    bench_swarm,
    bench_wake,
)
from bench._stats import emit, machine

BENCHMARKS: dict[str, Callable[[bool], None]] = {
    "startup": bench_startup.main,
    "spawn": bench_spawn.main,
    "runner": bench_runner.main,
    "message": bench_message.main,
    "followup": bench_followup.main,
    "inbox_wait": bench_inbox_wait.main,
    "cli": bench_cli.main,
    "control": bench_control.main,
    "scale": bench_scale.main,
    "groups": bench_groups.main,
    "harness": bench_harness.main,
    "hosts": bench_hosts.main,
    "wake": bench_wake.main,
    "metrics": bench_metrics.main,
    "dashboard": bench_dashboard.main,
    "swarm": bench_swarm.main,
}


def main() -> None:
    quick = "--quick" in sys.argv
    names = [a.removeprefix("bench_") for a in sys.argv[1:] if not a.startswith("-")]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(
            f"bench: no benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}",
            file=sys.stderr,
        )
        sys.exit(2)
    emit(machine() + ("  (quick mode)" if quick else ""))
    for name in names or BENCHMARKS:
        BENCHMARKS[name](quick)


if __name__ == "__main__":
    main()

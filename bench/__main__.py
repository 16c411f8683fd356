"""`python -m bench [--quick]`: run every benchmark and print its figures."""

from __future__ import annotations

import sys

from bench import (
    bench_cli,
    bench_control,
    bench_followup,
    bench_harness,
    bench_inbox_wait,
    bench_message,
    bench_scale,
    bench_spawn,
)
from bench._stats import emit, machine


def main() -> None:
    quick = "--quick" in sys.argv
    emit(machine() + ("  (quick mode)" if quick else ""))
    bench_spawn.main(quick)
    bench_message.main(quick)
    bench_followup.main(quick)
    bench_inbox_wait.main(quick)
    bench_cli.main(quick)
    bench_control.main(quick)
    bench_scale.main(quick)
    bench_harness.main(quick)


if __name__ == "__main__":
    main()

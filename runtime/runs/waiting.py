"""Block until a run is terminal, without polling its files in a loop.

The wait sleeps on the runner's pidfd (readable when the process exits), waking every
`tick` seconds only to report progress. Before the runner's identity is recorded (the
first milliseconds of a run) it re-checks at a short interval.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from runtime.core.process import pidfd_open
from runtime.runs.status import TERMINAL, derive, find_run, runner_identity
from runtime.store.layout import StateRoot

if TYPE_CHECKING:
    from runtime.store.records import RunStatus


def wait_for(
    root: StateRoot,
    run_id: str,
    *,
    timeout: float | None = None,
    tick: float = 0.5,
    on_tick: Callable[[RunStatus], None] | None = None,
) -> RunStatus:
    """The run's final status summary, or its current one when `timeout` expires."""
    deadline = None if timeout is None else time.monotonic() + timeout
    paths, run = find_run(root, run_id)
    pidfd: int | None = None
    try:
        while True:
            summary = derive(paths, run)
            if summary["status"] in TERMINAL:
                return summary
            if on_tick is not None:
                on_tick(summary)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return summary
            step = tick if remaining is None else min(tick, remaining)
            if pidfd is None:
                identity = runner_identity(paths, run)
                if identity is not None:
                    pidfd = pidfd_open(int(identity["pid"]))
                else:
                    paths, run = find_run(root, run_id)
            if pidfd is not None:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                poller.poll(step * 1000)  # readable = runner exited (result is published first)
            else:
                time.sleep(min(step, 0.02))
    finally:
        if pidfd is not None:
            os.close(pidfd)

"""Block until a run is terminal, without polling its files in a loop.

The wait sleeps on the runner's pidfd (readable when the process exits), waking every
`tick` seconds only to report progress. Before the runner's identity is recorded (the
first milliseconds of a run) it re-checks at a short interval.

A caller recorded as the run's waiter (`spawn --wait`, a foreground `actors run`) passes
`hold=True`: once the run is terminal it stays alive until the runner has exited (so it
has decided about the follow-up while this caller provably still waited), bounded by the
delivery budget plus a second. Without that, a fast caller could return between
result.json and the runner's check, and the runner would deliver a follow-up nobody
needs.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from runtime.core import config
from runtime.core.process import pidfd_open, verify
from runtime.store.layout import StateRoot
from runtime.views.status import TERMINAL, derive, find_run, runner_identity

if TYPE_CHECKING:
    from runtime.store.layout import RunPaths
    from runtime.store.records import RunRecord, RunStatus


def wait_for(
    root: StateRoot,
    run_id: str,
    *,
    timeout: float | None = None,
    tick: float = 0.5,
    on_tick: Callable[[RunStatus], None] | None = None,
    hold: bool = False,
) -> RunStatus:
    """The run's final status summary, or its current one when `timeout` expires.
    `hold`: this caller is the run's recorded waiter (see the module docstring)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    paths, run = find_run(root, run_id)
    pidfd: int | None = None
    try:
        while True:
            summary = derive(paths, run)
            if summary["status"] in TERMINAL:
                if hold:
                    _until_runner_exits(paths, run)
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


def _until_runner_exits(paths: RunPaths, run: RunRecord) -> None:
    """Block (bounded) until the runner has decided about the follow-up: followup.json
    exists (a skip, since we are its live waiter, or a delivery) or the runner is gone.
    The pidfd wakes us at its exit; the marker is re-checked every 50 ms meanwhile, for a
    runner that lingers after deciding (an opted-in step delivery still landing)."""
    identity = runner_identity(paths, run)
    pidfd = pidfd_open(int(identity["pid"])) if identity else None
    if pidfd is None:
        return
    try:
        if verify(identity)[0] != "valid":  # the pid was recycled before we pinned it
            return
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + config.seconds(config.DELIVERY_BUDGET) + 1.0
        while not paths.followup.exists() and time.monotonic() < deadline:
            if poller.poll(50):
                return
    finally:
        os.close(pidfd)

"""The runner's trio side: the template graph, with the tasks that watch it from beside.

Beside them, the guardian of the runs this run spawns (runtime.runs.guardian) folds a
child whose runner crashed, so its `run.exited` reaches this run's inbox. While the graph
runs, three tasks may stop it: the signal watcher (SIGTERM / SIGINT /
SIGHUP are a graceful stop), the control consumer (`control.stop` / `control.kill` from
the run's inbox, woken by its doorbell) and, for `retire_when: children_terminal`, the
retirement watcher. Its own module because it imports trio, which the runner may load
only after recording its identity.
"""

from __future__ import annotations

import os
import signal
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from runtime.core.process import replay_early_stops
from runtime.messaging.boxes import control_mailbox, run_mailbox
from runtime.messaging.doorbells import doorbell
from runtime.runs.context import Outcome, RunContext
from runtime.runs.events import record_advisory, record_event
from runtime.runs.executor import run_node
from runtime.runs.guardian import watch_session_runs
from runtime.runs.index import list_runs
from runtime.runs.lean_parts import apply_control, claim_controls
from runtime.runs.status import TERMINAL
from runtime.store.layout import RunPaths, StateRoot

if TYPE_CHECKING:
    from runtime.store.records import ListedRun, RunRecord

CONTROL_COALESCE_S = 0.002
RETIRE_SETTLE_S = 1.0  # children spawned within this long after the others ended still count
# No periodic re-check here (issue 21): the control consumer sleeps on its doorbell alone
# (a sender rings inside its append's lock, runtime.messaging.mailbox), and the
# retirement watcher on its `run` doorbell, which every child's end rings
# (runtime.delivery.followups: its follow-up, or a bare ring when none is owed).


async def run_graph(ctx: RunContext, paths: RunPaths, run: RunRecord) -> Outcome | None:
    """Run the template graph with its watchers; None when it was stopped before an outcome."""
    outcome = None
    async with trio.open_nursery() as nursery:
        await nursery.start(_watch_signals, ctx, paths)
        await nursery.start(_consume_controls, ctx, paths)
        # the runs this run spawns follow up to its inbox: fold them here if they crash
        me = f"run:{run['run']}"
        await nursery.start(partial(watch_session_runs, StateRoot.from_env(), me, scan_first=False))
        if run.get("retire_when") == "children_terminal":
            await nursery.start(_retire_when_children_end, ctx, paths, run)
        ctx.progress()
        with ctx.root_scope:
            outcome = await run_node(ctx, run["template"], None)
        nursery.cancel_scope.cancel()
    return outcome


async def _watch_signals(
    ctx: RunContext, paths: RunPaths, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        replay_early_stops()
        task_status.started()
        async for signum in signals:
            record_advisory(
                paths.events, ctx.instance, "run.signal", signal=signal.Signals(signum).name
            )
            ctx.stop("cancelled")


async def _consume_controls(
    ctx: RunContext, paths: RunPaths, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """Apply control.* messages from the run's inbox (woken by its doorbell)."""
    box = control_mailbox(paths)
    with doorbell(box.doorbells, topic="control") as fd:
        task_status.started()
        while True:
            for entry in claim_controls(box):
                apply_control(ctx, box, entry)
            await trio.lowlevel.wait_readable(fd)
            # Coalesce a burst: one claim pass for everything rung in the next ms,
            # instead of one pass (and one flock) per message of a busy inbox.
            await trio.sleep(CONTROL_COALESCE_S)
            _drain_bell(fd)


async def _retire_when_children_end(
    ctx: RunContext,
    paths: RunPaths,
    run: RunRecord,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """`retire_when: children_terminal`: once this run has spawned child runs and every
    one of them is terminal, stop this run (SIGTERM, grace, SIGKILL), exactly once.
    Woken by the children's ends alone: each rings this run's `run` doorbell (its
    follow-up `run.*` is routed to this run's inbox; a child owed none rings bare; a
    child whose runner vanished is folded by this runner's guardian, which sends its
    `run.exited`). The doorbell is armed before the first look at the children."""
    me, root = f"run:{run['run']}", StateRoot.from_env()
    with doorbell(run_mailbox(paths).doorbells, topic="run") as fd:
        task_status.started()
        while True:
            children = await _children(root, me)
            if children and all(r.get("status") in TERMINAL for r in children):
                # settle: a supervisor may be between two spawns when its first child ends
                await trio.sleep(RETIRE_SETTLE_S)
                again = await _children(root, me)
                if sorted(r["run"] for r in again) != sorted(r["run"] for r in children):
                    continue
                record_event(
                    paths.events, ctx.instance, "run.retire", children=[r["run"] for r in children]
                )
                ctx.stop("retired")
                return
            await trio.lowlevel.wait_readable(fd)
            _drain_bell(fd)


async def _children(root: StateRoot, parent: str) -> list[ListedRun]:
    """The runs `parent` spawned (the index is read off the event loop)."""
    return [r for r in await trio.to_thread.run_sync(list_runs, root) if r.get("parent") == parent]


def _drain_bell(fd: int) -> None:
    try:
        os.read(fd, 65536)
    except BlockingIOError:
        pass

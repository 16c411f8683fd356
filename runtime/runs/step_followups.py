"""A run's step follow-ups: every finished command journalled in the outbox and, for a
recipe that opts in (`command.done` in `mailbox.emits`), the failed or concurrent ones
delivered to the coordinator while the run goes on. By default a run's outcome is told
once, by its terminal follow-up.

A delivery may block (a webhook timing out), so each runs on a worker thread, as a task
of the runner's outermost nursery: it never stalls the graph, and the runner waits for
it (up to the delivery budget) before the terminal follow-up, then for any straggler
before the process exits. Its own module because it imports trio, which the runner may
load only after recording its identity.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from runtime.core.errors import log_exception
from runtime.delivery.followups import deliver
from runtime.messaging.envelope import build_envelope
from runtime.runs.context import RunContext
from runtime.store.appends import append_jsonl
from runtime.store.journals import LOG
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.writes import patiently

if TYPE_CHECKING:
    import trio

    from runtime.store.records import RunRecord


class Deliveries:
    """Deliveries in flight, each on its own worker thread (no cap: a slow adapter must
    not hold up the next command's follow-up, nor the runner's other thread work)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        import trio  # deferred: the lean runner's Deliveries are plain threads

        self._nursery = nursery
        self._limiter = trio.CapacityLimiter(math.inf)
        self._pending = 0
        self._idle = trio.Event()
        self._idle.set()

    def submit(self, work: Callable[[], object], name: str) -> None:
        """Start `work` now; it must handle its own errors (nothing awaits its result)."""
        import trio

        if self._pending == 0:
            self._idle = trio.Event()
        self._pending += 1
        self._nursery.start_soon(self._run, work, name, name=name)

    async def _run(self, work: Callable[[], object], name: str) -> None:
        import trio

        try:
            await trio.to_thread.run_sync(work, thread_name=name, limiter=self._limiter)
        finally:
            self._pending -= 1
            if self._pending == 0:
                self._idle.set()

    async def drain(self, budget_s: float) -> None:
        """Wait until nothing is in flight, or `budget_s` has passed (they go on then)."""
        import trio

        with trio.move_on_after(budget_s):
            await self._idle.wait()


class ThreadDeliveries:
    """The lean runner's (runtime.runs.lean) step deliveries: plain threads, no trio.
    A single-leaf run has at most one in flight, at its very end."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def submit(self, work: Callable[[], object], name: str) -> None:
        thread = threading.Thread(target=work, name=name)  # not daemon: exit waits for it
        thread.start()
        self._threads.append(thread)

    def drain(self, budget_s: float) -> None:
        deadline = time.monotonic() + budget_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


@asynccontextmanager
async def open_deliveries() -> AsyncIterator[Deliveries]:
    """Deliveries whose block does not end before every one of them has."""
    import trio

    async with trio.open_nursery() as nursery:
        yield Deliveries(nursery)


def steps_opted_in(run: RunRecord) -> bool:
    """Does the recipe ask for step follow-ups (`command.done` in `mailbox.emits`)?"""
    emits = (run.get("mailbox") or {}).get("emits") or []
    return any((e.get("type") if isinstance(e, dict) else e) == "command.done" for e in emits)


def command_done(
    paths: RunPaths,
    run: RunRecord,
    ctx: RunContext,
    done: dict[str, Any],
    deliveries: Deliveries | ThreadDeliveries,
) -> None:
    """Journal every leaf in the outbox; for a recipe that opted in, bubble failures and
    parallel branch completions."""
    failed = done["status"] != "done"
    bubbles = steps_opted_in(run) and (failed or ctx.active > 0)
    name = done.get("label") or done["node"]
    outcome = f"failed with code {done['code']}" if failed else "done"
    envelope = build_envelope(
        type="command.done",
        to="coordinator",
        sender=f"run:{run['run']}",
        summary=f"Run {run['run']}: command {name} {outcome}; next: actors status {run['run']}",
        level="error" if failed else "info",
        body=done,
        extra={
            "run": run["run"],
            "run_instance_id": run["run_instance_id"],
            "delivery": "followup" if bubbles else "log",
        },
    )
    # a full disk is waited out: a step's record never ends the run it belongs to
    patiently(
        lambda: append_jsonl(paths.outbox, envelope, compactor=LOG),
        "journal command.done in outbox.jsonl",
    )
    if envelope["delivery"] == "followup" and done["status"] != "cancelled":

        def send() -> None:
            try:
                deliver(StateRoot.from_env(), run, envelope)
            except Exception as exc:
                log_exception(exc)  # runner.log

        deliveries.submit(send, f"followup-{done['command_id']}")

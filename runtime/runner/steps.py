"""A run's step follow-ups: every finished command journalled in the outbox and, for a
recipe that opts in (`command.done` in `mailbox.emits`), the failed or concurrent ones
delivered to the coordinator while the run goes on. By default a run's outcome is told
once, by its terminal follow-up.

A delivery may block (a webhook timing out), so each runs on a plain thread: it never
stalls the graph, and the runner waits for it (up to the delivery budget) before the
terminal follow-up, then for any straggler before the process exits. Imported when a
command ends, never while a run starts or idles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.core.errors import log_exception
from runtime.delivery.followups import deliver
from runtime.messaging.envelope import build_envelope
from runtime.runner.context import RunContext
from runtime.store.appends import append_jsonl
from runtime.store.journals import LOG
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.writes import patiently

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


class Deliveries:
    """Step deliveries in flight, each on its own plain thread (no cap: a slow adapter
    must not hold up the next command's follow-up). The runner does not park while one
    is in flight (exec would end it), and waits for them, up to the delivery budget,
    before its terminal follow-up."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def submit(self, work: Callable[[], object], name: str) -> None:
        """Start `work` now; it must handle its own errors (nothing awaits its result)."""
        thread = threading.Thread(target=work, name=name)  # not daemon: exit waits for it
        thread.start()
        self._threads.append(thread)

    def pending(self) -> bool:
        self._threads = [t for t in self._threads if t.is_alive()]
        return bool(self._threads)

    def drain(self, budget_s: float) -> None:
        """Wait until nothing is in flight, or `budget_s` has passed (they go on then)."""
        deadline = time.monotonic() + budget_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def steps_opted_in(run: RunRecord) -> bool:
    """Does the recipe ask for step follow-ups (`command.done` in `mailbox.emits`)?"""
    emits = (run.get("mailbox") or {}).get("emits") or []
    return any((e.get("type") if isinstance(e, dict) else e) == "command.done" for e in emits)


def command_done(
    paths: RunPaths,
    run: RunRecord,
    ctx: RunContext,
    done: dict[str, Any],
    deliveries: Deliveries,
) -> None:
    """Journal every leaf in the outbox; for a recipe that opted in, bubble failures and
    parallel branch completions."""
    failed = done["status"] != "done"
    bubbles = steps_opted_in(run) and (failed or ctx.steps.counts()["active"] > 0)
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

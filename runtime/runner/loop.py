"""The runner: one poll() loop that supervises a run's graph, and parks it when idle.

One process per run owns the run from start to end (runtime/runner/entry.py starts it). It
waits on one poll() set and nothing else: the graph's commands (their exit watches and
pipes, runtime.runner.graph), the stop signals (SIGTERM / SIGINT / SIGHUP: a graceful
stop; on the portable path SIGCHLD too), the run's doorbells (`control.*` messages from
its inbox; its guardian bell, rung when a run it spawned records its identity; the
`run.*` bell of a `retire_when` supervisor) and the guardian of the runs it spawned
(runtime.runner.guardian: a crashed child's run is folded here, so its `run.exited`
reaches this run). The poll's
timeout is the graph's next deadline (a timeout, a delay, a grace period), the
retirement's settle time, or the moment to park.

When nothing has happened for a while (`LINGER_MIN_S`, doubling up to `LINGER_MAX_S`
after each quiet spell) and no step follow-up is in flight, the runner parks
(runtime.runner.park): it exec()s into an image that imports nothing and waits on the very
same descriptors, then exec()s back here on any of them or at the next deadline. So a
swarm worker, a fan-out of long commands or a supervisor idles at a bare interpreter's
cost, whatever its graph.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import TYPE_CHECKING, Any

from runtime.core import platform
from runtime.core.config import MAX_SECONDS
from runtime.core.process import replay_early_stops
from runtime.runner.graph import Graph
from runtime.store.events import record_advisory, record_event

if TYPE_CHECKING:
    from collections.abc import Callable

    from runtime.messaging.doorbells import Bell
    from runtime.messaging.entries import MailboxEntry
    from runtime.messaging.mailbox import Mailbox
    from runtime.runner.context import Outcome, RunContext
    from runtime.runner.gate import Gate
    from runtime.runner.guardian import Guard
    from runtime.runner.steps import Deliveries
    from runtime.store.layout import RunPaths
    from runtime.store.records import RunRecord, StopRecord

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LINGER_MIN_S = 0.25
"""How long the runner stays up after an event before it parks; after a wake it stays
twice as long as the quiet spell before it, up to LINGER_MAX_S, so a command that prints
every few seconds keeps it up and one that prints rarely costs one exec each time."""
LINGER_MAX_S = 30.0
RETIRE_SETTLE_S = 1.0
"""Children spawned within this long after the others ended still count (a supervisor
may be between two spawns when its first child ends)."""
CONTROL_BATCH = 16
HOLDING_RETRY_S = 2.0
"""While output is held for a full disk (runtime.runner.output.Held), how often an idle
runner tries to write it, instead of parking (the held bytes are in its memory)."""


def stop_signals() -> tuple[int, ...]:
    """The signals the loop takes through its wakeup pipe."""
    if platform.watches_children_by_signal():
        return (*STOP_SIGNALS, signal.SIGCHLD)
    return STOP_SIGNALS


def _noted(signum: int, frame: Any) -> None:
    """A signal: its number reaches the wakeup pipe, read in the loop."""


class Runner:
    """One run's supervision: its graph, its doorbells, its children, its signals."""

    def __init__(self, paths: RunPaths, run: RunRecord, ctx: RunContext) -> None:
        self.paths, self.run, self.ctx = paths, run, ctx
        self.graph = Graph(ctx, run["template"])
        self.bells: dict[str, Bell] = {}
        self.gate: Gate | None = None
        """What the run waits for before its graph starts (runtime.runner.gate): None
        for most runs, which start at once."""
        self.guard: Guard | None = None
        """The guardian of the runs this run spawned, made at the first ring of its bell
        (runtime.runner.guardian): most runs spawn none and never import it."""
        self.wakeup = -1
        self.retire_at: float | None = None
        self.retire_seen: list[str] = []
        self.stopped = False
        """Whether the graph was told to stop (once, when ctx.stop_reason is first set)."""
        self.started, self.started_at = time.monotonic(), ""
        self.last_event = time.monotonic()
        self.graph_started = False
        self.linger = LINGER_MIN_S
        self.deliveries: Deliveries | None = None
        self.park: Callable[[Runner], None] | None = None
        """exec() into the idle wait (runtime.runner.park.park); None: never park."""

    # --- start ----------------------------------------------------------------------

    def listen(self) -> None:
        """The doorbells this runner is woken by."""
        from runtime.messaging.boxes import control_mailbox, run_mailbox
        from runtime.messaging.doorbells import Bell
        from runtime.runner.bells import guardian_bells
        from runtime.store.layout import StateRoot

        me = f"run:{self.run['run']}"
        self.bells["control"] = Bell.open(control_mailbox(self.paths).doorbells, "control")
        self.bells["guardian"] = Bell.open(guardian_bells(StateRoot.from_env(), me))
        if self.run.get("retire_when") == "children_terminal":
            self.bells["retire"] = Bell.open(run_mailbox(self.paths).doorbells, "run")

    def watch_signals(self) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)
        for sig in stop_signals():
            signal.signal(sig, _noted)
        self.wakeup = read
        replay_early_stops()

    # --- the loop ---------------------------------------------------------------------

    def start(self) -> None:
        """The graph starts now, or, for a run that waits (`--after`, `--group`), once
        its gate opens: until then the run is `queued`."""
        gate = self.gate
        if gate is None:
            self.graph_started = True
            self.ctx.progress()
            self.graph.start()
            return
        record_event(
            self.paths.events, self.ctx.instance, "run.queued", group=gate.group, after=gate.after
        )
        gate.look()
        self.through_gate()

    def through_gate(self) -> None:
        """Once the gate is open, the graph starts (once); while it is shut, progress
        says what the run waits for."""
        gate = self.gate
        if gate is None or gate.skipped is not None or self.ctx.stop_reason is not None:
            return
        if not gate.opened:
            self.ctx.progress(phase="queued", waiting_for=gate.waiting_for())
            return
        if self.graph_started:
            return
        self.graph_started = True
        slot = None if gate.slot is None else gate.slot.index
        record_event(
            self.paths.events,
            self.ctx.instance,
            "run.dequeued",
            group=gate.group,
            slot=slot,
            waited_ms=round((time.monotonic() - self.started) * 1000),
        )
        self.ctx.progress()
        self.graph.start()

    def supervise(self) -> Outcome | None:
        """Run the graph to its end; its outcome, or None when it was stopped first."""
        self.claim_controls()
        if "retire" in self.bells:
            self.check_retire()
        graph = self.graph
        while True:
            gate = self.gate
            if gate is not None and not self.graph_started:
                if self.ctx.stop_reason is not None:
                    return None  # stopped while queued: its graph never started
                if gate.skipped is not None:
                    self.ctx.skipped = gate.skipped
                    return None
            elif self.ctx.stop_reason is not None and not self.stopped:
                self.stopped = True
                graph.stop()
            if graph.done:
                return graph.outcome
            now = time.monotonic()
            parking = self.park_at()
            gate_at = gate.deadline() if gate is not None else None
            times = (graph.deadline(), self.retire_at, parking, gate_at)
            deadlines = [t for t in times if t is not None]
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            ready = self.wait(timeout)
            now = time.monotonic()
            if ready:
                self.last_event = now
                for fd in ready:
                    self.handle(fd)
            elif parking is not None and now >= parking and self.park is not None:
                if not self.holding():
                    self.park(self)  # exec(): returns only when it could not
                self.last_event = now
            if gate is not None and not self.graph_started:
                gate.tick(now)
                self.through_gate()
            graph.tick(now)
            self.tick_retire(now)
            self.tell_followers()

    def tell_followers(self) -> None:
        """Ring the `tail -f` readers of this run: its logs or journal may have grown.
        One stat when nobody follows (no `followers/` directory)."""
        if os.path.isdir(self.paths.followers):
            from runtime.messaging.doorbells import ring

            ring(self.paths.followers)

    def park_at(self) -> float | None:
        """When to park, or None while something needs this image up."""
        if self.holding():  # output a full disk did not take lives in this image only
            return self.last_event + HOLDING_RETRY_S
        if self.park is None or self.stopped or self.graph.busy():
            return None
        if self.guard is not None and not self.guard.crosses_exec():
            return None  # a portable exit watch is a thread: it would not survive exec
        if self.gate is not None and not self.gate.crosses_exec():
            return None
        if self.deliveries is not None and self.deliveries.pending():
            return None
        return self.last_event + self.linger

    def holding(self) -> bool:
        """Write what the disk did not take yet; True while some is still held
        (runtime.runner.output.Held)."""
        held = [s.capture.held for c in self.graph.commands() for s in c.streams]
        held += self.ctx.held()
        return any(not h.retry() for h in held if h.holding)

    def fds(self) -> list[int]:
        bells = [bell.read for bell in self.bells.values()]
        guard = self.guard.fds() if self.guard is not None else []
        gate = self.gate.fds() if self.gate is not None else []
        return [self.wakeup, *bells, *guard, *gate, *self.graph.fds()]

    def wait(self, timeout: float | None) -> list[int]:
        poller = select.poll()
        for fd in self.fds():
            poller.register(fd, select.POLLIN)
        # a deadline past poll's longest wait (a recipe's month-long timeout) is slept in
        # steps: a wake with nothing ready makes the caller look at its deadlines again
        ms = None if timeout is None else int(min(timeout, MAX_SECONDS) * 1000) + 1
        return [fd for fd, _ in poller.poll(ms)]

    def handle(self, fd: int) -> None:
        if fd == self.wakeup:
            self.signalled(os.read(fd, 64))
        elif "control" in self.bells and fd == self.bells["control"].read:
            self.bells["control"].drain()
            self.claim_controls()
        elif "guardian" in self.bells and fd == self.bells["guardian"].read:
            self.guard_children()
        elif "retire" in self.bells and fd == self.bells["retire"].read:
            self.bells["retire"].drain()
            self.check_retire()
        elif self.gate is not None and self.gate.handle(fd):
            self.through_gate()
        elif self.guard is None or not self.guard.handle(fd):
            self.graph.readable(fd)

    def signalled(self, signums: bytes) -> None:
        for signum in signums:
            if signum == signal.SIGCHLD:
                self.graph.reaped()
                continue
            record_advisory(
                self.paths.events,
                self.ctx.instance,
                "run.signal",
                signal=signal.Signals(signum).name,
            )
            self.ctx.stop("cancelled", self.signalled_by())

    def signalled_by(self) -> StopRecord | None:
        """Who sent the stop signal, as `cancel` wrote it to stop.json before sending it;
        None when nobody said (a signal from elsewhere) or it cannot be read now."""
        from runtime.core.errors import ActorsError
        from runtime.views.status import stop_intent, stopper  # deferred: a stop only

        try:
            return stopper(stop_intent(self.paths, self.ctx.instance))
        except ActorsError:  # no descriptor left: the run stops all the same
            return None

    # --- what else the runner watches -------------------------------------------------

    def claim_controls(self) -> None:
        """`control.*` messages from the run's inbox: stop (graceful) or kill."""
        box = control_box(self.paths)
        if box is None:
            return
        from runtime.messaging.boxes import CONTROL_TYPES
        from runtime.store.writes import patiently

        claimed = patiently(  # the claim is journaled: a full disk is waited out
            lambda: box.claim(types=CONTROL_TYPES, limit=CONTROL_BATCH, consumer="runner"),
            "claim control messages",
        )
        for entry in claimed:
            apply_control(self.ctx, box, entry)

    def guard_children(self) -> None:
        """A run this run spawned has recorded its identity: from now on its runner is
        guarded (runtime.runner.guardian), so a crash of it is folded into this run."""
        from runtime.runner.guardian import Guard
        from runtime.store.layout import StateRoot

        bell = self.bells.pop("guardian")
        self.guard = Guard(StateRoot.from_env(), f"run:{self.run['run']}", bell=bell)
        self.guard.handle(bell.read)

    def check_retire(self) -> None:
        """`retire_when: children_terminal`: once this run has spawned child runs and
        every one of them is terminal (and stays so for the settle time), stop it."""
        children = self._children()
        if children and all(r.get("status") in _terminal() for r in children):
            if self.retire_at is None:
                self.retire_at = time.monotonic() + RETIRE_SETTLE_S
                self.retire_seen = sorted(r["run"] for r in children)
        else:
            self.retire_at = None

    def tick_retire(self, now: float) -> None:
        if self.retire_at is None or now < self.retire_at:
            return
        self.retire_at = None
        again = self._children()
        same = sorted(r["run"] for r in again) == self.retire_seen
        if same and all(r.get("status") in _terminal() for r in again):
            record_event(
                self.paths.events, self.ctx.instance, "run.retire", children=self.retire_seen
            )
            self.ctx.stop("retired")
            return
        self.check_retire()

    def _children(self) -> list[dict[str, Any]]:
        from runtime.store.layout import StateRoot
        from runtime.views.index import list_runs

        me = f"run:{self.run['run']}"
        return [dict(r) for r in list_runs(StateRoot.from_env()) if r.get("parent") == me]

    # --- the end ----------------------------------------------------------------------

    def close(self) -> None:
        """Doorbells (their FIFOs removed) and exit watches (a group slot is kept until
        the run's end is written and its processes are gone: `Gate.release`)."""
        if self.gate is not None:
            self.gate.close()
        for bell in self.bells.values():
            bell.close()
        self.bells.clear()
        if self.guard is not None:
            self.guard.close()
            self.guard = None


def apply_control(ctx: RunContext, box: Mailbox, entry: MailboxEntry) -> None:
    """`control.stop` (graceful) and `control.kill` (no grace) stop the run; any other
    control type applies to finished runs only."""
    from runtime.store.writes import patiently  # each mark waits out a full disk

    envelope = entry["envelope"]
    kind = envelope["type"]
    by: StopRecord = {"by": str(envelope.get("from")), "forced": envelope.get("forced") is True}
    if kind == "control.stop":
        patiently(lambda: box.mark(entry["id"], "handled"), "mark control.stop handled")
        ctx.stop("stopped", by)
    elif kind == "control.kill":
        patiently(lambda: box.mark(entry["id"], "handled"), "mark control.kill handled")
        ctx.grace = 0.0
        ctx.stop("killed", by)
    else:
        why = f"{kind} applies to finished runs only"
        patiently(lambda: box.mark(entry["id"], "failed", error=why), f"mark {kind} failed")


def control_box(paths: RunPaths) -> Mailbox | None:
    """The run's control mailbox, or None while no inbox exists (the common case: reading
    it would cost the mailbox's imports at every start). Only absence says "nothing":
    a sender creates the journal before it rings and writes after, under the lock the
    claim waits for, so an empty journal may be a message on its way
    (runtime.messaging.mailbox, `append_ringing`)."""
    if not os.path.lexists(paths.inbox):
        return None
    from runtime.messaging.boxes import control_mailbox

    return control_mailbox(paths)


def _terminal() -> tuple[str, ...]:
    from runtime.views.status import TERMINAL

    return TERMINAL

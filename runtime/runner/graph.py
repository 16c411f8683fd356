"""The template graph of one run as a state machine: every node kind, written once.

Semantics (docs/recipes.md has the user-facing version):
- a leaf's argv is rendered per word and executed without a shell, in its own process
  group (runtime.runner.command);
- a sequence feeds each step the previous step's complete stdout on stdin; a parallel
  node gives every branch the same stdin (at most `concurrency` at once) and joins their
  outputs in order under `--- branch: <label> status: <s> ---` headers, which no branch
  output can forge (a line of it that starts like one is quoted,
  runtime.runner.output.HeaderQuote);
- `when` skips a node whose condition renders false; `repeat` makes a node a sequence
  (or, with `parallel`, a parallel group) of instances with their index variables;
  `delay` waits before the node starts;
- `retry` is the maximum number of attempts, with `recover` run between failed ones;
  `timeout` bounds each attempt (the attempt's commands are stopped: SIGTERM, the grace,
  SIGKILL) and ends it as `timeout`, code 124;
- a failure's policy decides how far it reaches: `continue` (default) lets the rest run
  but still fails the enclosing node, `branch` stops the enclosing subtree up to the
  nearest parallel branch where it is contained (the run is then degraded), `root` aborts
  the whole run at once; `min_successful` makes a parallel group succeed once that many
  branches produced output.

Why a state machine and not coroutines: the runner waits on one poll() set
(runtime.runner.loop) and, when nothing happens, parks by exec() into an image that
imports nothing (runtime.runner.park). A coroutine cannot cross an exec(); this graph's
state is plain data (`snapshot()` / `Graph.restore()`), so any graph parks.

Stopping: a stop (`control.stop`, a signal, `failure: root`) or a node's timeout cancels
a subtree. Its running commands are stopped; its frames then vanish without an outcome of
their own (as a cancelled task unwinds), and the timed-out node ends `timeout`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from runtime.compiler.placeholders import MAX_REPEAT, substitute_word, truthy
from runtime.core.errors import BadInput
from runtime.runner.command import Command, begin_leaf
from runtime.runner.context import Escalation, Outcome, RunContext
from runtime.runner.output import LOG_CAP_BYTES, Capture, quoted_copy, trim
from runtime.store import safe
from runtime.store.writes import ensure_dir
from runtime.views.counts import TIMEOUT_CODE

MAX_PARALLEL_REPEAT = 64

NEW, DELAY, ATTEMPT, RECOVER = "new", "delay", "attempt", "recover"


def _label(node: dict[str, Any], index: int) -> str:
    return str(node.get("label") or f"branch-{index}")


def _out(outcome: Outcome) -> dict[str, Any]:
    return {
        "status": outcome.status,
        "code": outcome.code,
        "output": None if outcome.output is None else str(outcome.output),
        "escalation": outcome.escalation,
        "degraded": outcome.degraded,
        "reason": outcome.reason,
    }


def _in(saved: dict[str, Any] | None) -> Outcome | None:
    if saved is None:
        return None
    output = saved["output"]
    return Outcome(
        saved["status"],
        saved["code"],
        None if output is None else Path(output),
        saved["escalation"],
        saved["degraded"],
        saved["reason"],
    )


class Frame:
    """One node being executed: where it is in its attempts and in its children."""

    __slots__ = (
        "attempt",
        "children",
        "command",
        "deadline",
        "delay_until",
        "feeds",
        "key",
        "node",
        "par",
        "parent",
        "pending",
        "phase",
        "seq",
        "stdin",
        "timed_out",
        "unwinding",
    )

    def __init__(
        self, key: str, node: dict[str, Any], parent: str | None, stdin: Path | None, feeds: bool
    ) -> None:
        self.key, self.node, self.parent, self.stdin, self.feeds = key, node, parent, stdin, feeds
        self.phase = NEW
        self.attempt = 0
        self.deadline: float | None = None
        """When the current attempt times out (monotonic; the same clock after exec)."""
        self.delay_until: float | None = None
        self.timed_out = False
        self.unwinding = False
        """Cancelled from above: it vanishes once nothing of it runs."""
        self.children: list[str] = []
        """Keys of the child frames of the current attempt that are still alive."""
        self.command: Command | None = None
        """The running command: the leaf's attempt, or the recover between attempts."""
        self.pending: Outcome | None = None
        """The failed attempt's outcome while its `recover` command runs."""
        self.seq: dict[str, Any] = {}
        """A sequence's walk: index, current stdin, first failure, degraded, last."""
        self.par: dict[str, Any] = {}
        """A parallel group's: minimum, labels, results, next to start, running."""

    def snapshot(self) -> dict[str, Any]:
        seq = dict(self.seq)
        for key in ("failed", "last"):
            if key in seq:
                seq[key] = _out(seq[key]) if seq[key] is not None else None
        if "current" in seq:
            seq["current"] = None if seq["current"] is None else str(seq["current"])
        par = dict(self.par)
        if "results" in par:
            par["results"] = [None if r is None else _out(r) for r in par["results"]]
        return {
            "key": self.key,
            "node": self.node,
            "parent": self.parent,
            "stdin": None if self.stdin is None else str(self.stdin),
            "feeds": self.feeds,
            "phase": self.phase,
            "attempt": self.attempt,
            "deadline": self.deadline,
            "delay_until": self.delay_until,
            "timed_out": self.timed_out,
            "unwinding": self.unwinding,
            "children": self.children,
            "pending": None if self.pending is None else _out(self.pending),
            "seq": seq,
            "par": par,
            "command": None if self.command is None else self.command.snapshot(),
        }

    @classmethod
    def restore(cls, ctx: RunContext, saved: dict[str, Any]) -> Frame:
        stdin = saved["stdin"]
        frame = cls(
            saved["key"],
            saved["node"],
            saved["parent"],
            None if stdin is None else Path(stdin),
            saved["feeds"],
        )
        frame.phase, frame.attempt = saved["phase"], saved["attempt"]
        frame.deadline, frame.delay_until = saved["deadline"], saved["delay_until"]
        frame.timed_out, frame.unwinding = saved["timed_out"], saved["unwinding"]
        frame.children, frame.pending = list(saved["children"]), _in(saved["pending"])
        seq = dict(saved["seq"])
        for key in ("failed", "last"):
            if key in seq:
                seq[key] = _in(seq[key])
        if "current" in seq:
            seq["current"] = None if seq["current"] is None else Path(seq["current"])
        frame.seq = seq
        par = dict(saved["par"])
        if "results" in par:
            par["results"] = [_in(r) for r in par["results"]]
        frame.par = par
        if saved["command"] is not None:
            frame.command = Command.restore(ctx, frame.node, saved["command"])
        return frame


class Graph:
    """The run's graph in execution. The loop drives it: `start()`, then for each event
    `readable(fd)`, `tick(now)`, `reaped()` or `stop()`, until `done`."""

    def __init__(self, ctx: RunContext, root: dict[str, Any]) -> None:
        self.ctx, self.root = ctx, root
        self.frames: dict[str, Frame] = {}
        self.done = False
        self.outcome: Outcome | None = None
        """The root's outcome; None when the run was stopped before it had one."""
        self.stopping = False
        self._keys = 0

    # --- what the loop asks ---------------------------------------------------------

    def commands(self) -> list[Command]:
        return [f.command for f in self.frames.values() if f.command is not None]

    def fds(self) -> dict[int, Command]:
        return {fd: c for c in self.commands() for fd in c.fds()}

    def deadline(self) -> float | None:
        times = [c.deadline() for c in self.commands()]
        for frame in self.frames.values():
            if not frame.unwinding and not frame.timed_out:
                times += [frame.deadline if frame.phase == ATTEMPT else None, frame.delay_until]
        found = [t for t in times if t is not None]
        return min(found) if found else None

    def busy(self) -> bool:
        """Whether a command is being stopped or drained (the loop stays up for it)."""
        return any(c.deadline() is not None for c in self.commands())

    # --- events -----------------------------------------------------------------------

    def start(self) -> None:
        self._begin(self._new_key(), self.root, None, None, False)
        self._settle()

    def readable(self, fd: int) -> None:
        command = self.fds().get(fd)
        if command is not None:
            command.readable(fd)
            self._settle()

    def reaped(self) -> None:
        for command in self.commands():
            command.reaped()
        self._settle()

    def tick(self, now: float) -> None:
        for command in self.commands():
            command.tick(now)
        for frame in list(self.frames.values()):
            if frame.key not in self.frames or frame.unwinding:
                continue
            if frame.phase == DELAY and frame.delay_until is not None and now >= frame.delay_until:
                frame.delay_until = None
                self._attempt(frame, 1)
            elif (
                frame.phase == ATTEMPT
                and frame.deadline is not None
                and now >= frame.deadline
                and not frame.timed_out
            ):
                self._time_out(frame)
        self._settle()

    def stop(self) -> None:
        """The run was stopped (ctx.stop_reason is set): everything unwinds."""
        self.stopping = True
        for frame in list(self.frames.values()):
            self._unwind(frame)
        self._settle()

    # --- starting ---------------------------------------------------------------------

    def _new_key(self) -> str:
        self._keys += 1
        return f"f{self._keys}"

    def values_of(self, frame: Frame | None, node: dict[str, Any]) -> dict[str, Any]:
        """A node's values: an import's defaults, the enclosing values, its own scope."""
        chain: list[dict[str, Any]] = [node]
        while frame is not None:
            chain.append(frame.node)
            frame = self.frames.get(frame.parent) if frame.parent else None
        values = self.ctx.values
        for each in reversed(chain):
            values = {**(each.get("scope_defaults") or {}), **values, **(each.get("scope") or {})}
        return values

    def _begin(
        self,
        key: str,
        node: dict[str, Any],
        parent: Frame | None,
        stdin: Path | None,
        feeds: bool,
    ) -> None:
        """A node starts (when, repeat, delay applied); its outcome may come at once."""
        frame = Frame(key, node, None if parent is None else parent.key, stdin, feeds)
        self.frames[key] = frame
        if parent is not None:
            parent.children.append(key)
        values = self.values_of(parent, node)
        if node.get("when") is not None and not _when(node["when"], values):
            self.ctx.nodes.append(
                {
                    "id": node["id"],
                    "label": node.get("label"),
                    "kind": node["kind"],
                    "status": "skipped",
                    "code": 0,
                    "attempts": 0,
                    "degraded": False,
                    "reason": f"when {node['when']!r} is false",
                }
            )
            self._deliver(frame, Outcome("done", 0, stdin, reason="skipped"))
            return
        if node.get("repeat") is not None:
            group = _repeat_group(node, values)
            if isinstance(group, Outcome):
                self._deliver(frame, group)
                return
            # the group runs in this node's place, with the node's values around it
            frame.node = {**group, "scope": values}
        if frame.node.get("delay_ms"):
            frame.phase = DELAY
            frame.delay_until = time.monotonic() + frame.node["delay_ms"] / 1000
            return
        self._attempt(frame, 1)

    def _attempt(self, frame: Frame, attempt: int) -> None:
        if self.ctx.stop_reason is not None:
            self._unwind(frame)
            return
        node = frame.node
        frame.phase, frame.attempt, frame.timed_out = ATTEMPT, attempt, False
        timeout_ms = node.get("timeout_ms")
        frame.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms else None
        kind = node["kind"]
        if kind == "leaf":
            self._command(frame, node["words"], frame.stdin, frame.feeds)
        elif kind == "sequence":
            frame.seq = {"index": 0, "current": frame.stdin, "failed": None, "degraded": False}
            frame.seq["last"] = None
            self._next_step(frame)
        else:
            self._start_parallel(frame)

    def _command(self, frame: Frame, words: list[str], stdin: Path | None, feeds: bool) -> None:
        values = self.values_of(self.frames.get(frame.parent or ""), frame.node)
        recover = frame.phase == RECOVER
        leaf = begin_leaf(
            self.ctx, frame.node, words, frame.attempt, values, feeds=feeds, recover=recover
        )
        if isinstance(leaf, Outcome):  # could not even be rendered
            self._command_ended(frame, leaf)
            return
        frame.command = Command(self.ctx, leaf)
        frame.command.launch(stdin)

    def _next_step(self, frame: Frame) -> None:
        seq = frame.seq
        children = frame.node["children"]
        index = seq["index"]
        later = frame.feeds or index < len(children) - 1  # a later step reads its output
        self._begin(self._new_key(), children[index], frame, seq["current"], later)

    def _start_parallel(self, frame: Frame) -> None:
        node = frame.node
        children = node["children"]
        minimum = _minimum(
            node, self.values_of(self.frames.get(frame.parent or ""), node), len(children)
        )
        if isinstance(minimum, Outcome):
            self._attempt_ended(frame, minimum)
            return
        frame.par = {
            "minimum": minimum,
            "labels": [_label(child, i) for i, child in enumerate(children, start=1)],
            "results": [None] * len(children),
            "next": 0,
            "keys": {},
        }
        self._fill(frame)

    def _fill(self, frame: Frame) -> None:
        """Start branches up to the group's concurrency."""
        par, children = frame.par, frame.node["children"]
        limit = frame.node.get("concurrency") or len(children)
        while par["next"] < len(children) and len(frame.children) < limit:
            if self.ctx.stop_reason is not None or frame.timed_out or frame.unwinding:
                return
            index = par["next"]
            par["next"] += 1
            key = self._new_key()
            par["keys"][key] = index
            self.ctx.branches[par["labels"][index]] = "running"
            self._begin(key, children[index], frame, frame.stdin, True)

    # --- ending -----------------------------------------------------------------------

    def _settle(self) -> None:
        """Hand every command that ended to its frame, until nothing changes."""
        moved = True
        while moved:
            moved = False
            for frame in list(self.frames.values()):
                command = frame.command
                if command is not None and command.ended and frame.key in self.frames:
                    frame.command = None
                    assert command.outcome is not None
                    self._command_ended(frame, command.outcome)
                    moved = True

    def _command_ended(self, frame: Frame, outcome: Outcome) -> None:
        if frame.unwinding:
            self._vanish(frame)
        elif frame.phase == RECOVER:
            self._recovered(frame, outcome)
        elif frame.timed_out:
            self._attempt_ended(frame, self._timeout_outcome(frame))
        else:
            self._attempt_ended(frame, outcome)

    def _child_ended(self, frame: Frame, key: str, outcome: Outcome) -> None:
        frame.children.remove(key)
        if frame.unwinding:
            if not frame.children:
                self._vanish(frame)
            return
        if frame.timed_out:
            if not frame.children:
                self._attempt_ended(frame, self._timeout_outcome(frame))
            return
        if frame.node["kind"] == "sequence":
            self._step_ended(frame, outcome)
        else:
            self._branch_ended(frame, key, outcome)

    def _step_ended(self, frame: Frame, last: Outcome) -> None:
        seq, stdin = frame.seq, frame.stdin
        current = seq["current"]
        if current != stdin and current != last.output:
            trim(current)  # read by the step that just ended, and by no other
        seq["last"] = last
        seq["degraded"] = seq["degraded"] or last.degraded
        if not last.ok:
            if last.status == "cancelled":
                self._attempt_ended(frame, last)
                return
            seq["failed"] = seq["failed"] or last
            if last.escalation in ("branch", "root"):
                escalation: Escalation | None = "branch" if last.escalation == "branch" else None
                self._attempt_ended(
                    frame,
                    Outcome(
                        last.status,
                        last.code,
                        last.output,
                        escalation,
                        seq["degraded"],
                        last.reason,
                    ),
                )
                return
        seq["current"] = last.output
        seq["index"] += 1
        if seq["index"] < len(frame.node["children"]):
            if self.ctx.stop_reason is not None:
                self._unwind(frame)
                return
            self._next_step(frame)
            return
        failed = seq["failed"]
        if failed is not None:
            outcome = Outcome(
                "failed", failed.code, last.output, None, seq["degraded"], failed.reason
            )
        else:
            outcome = Outcome("done", 0, last.output, None, seq["degraded"])
        self._attempt_ended(frame, outcome)

    def _branch_ended(self, frame: Frame, key: str, outcome: Outcome) -> None:
        par = frame.par
        index = par["keys"].pop(key)
        par["results"][index] = outcome
        self.ctx.branches[par["labels"][index]] = outcome.status
        if self.ctx.stop_reason is not None:
            if not frame.children:
                self._vanish(frame)  # a stopped group unwinds: it has no outcome
            return
        self._fill(frame)
        if frame.children or par["next"] < len(frame.node["children"]):
            return
        self._attempt_ended(frame, self._joined(frame))

    def _joined(self, frame: Frame) -> Outcome:
        node, par = frame.node, frame.par
        final = [r or Outcome("cancelled", 143, None) for r in par["results"]]
        minimum = par["minimum"]
        output = _join_outputs(
            self.ctx,
            {**node, "min_successful": minimum},
            par["labels"],
            final,
            (frame.stdin, frame.feeds),
        )
        successes = sum(1 for r in final if r.ok)
        usable = sum(1 for r in final if _usable(r))
        counted_failures = [r for r in final if not r.ok and r.escalation != "branch"]
        contained = [r for r in final if not r.ok and r.escalation == "branch"]
        ok = usable >= minimum if minimum is not None else not counted_failures and successes > 0
        degraded = ok and (
            len(contained) + len(counted_failures) > 0 or any(r.degraded for r in final)
        )
        if ok:
            return Outcome("done", 0, output, None, degraded)
        worst = (counted_failures or contained or final)[0]
        reason = f"{successes} of {len(final)} branches succeeded"
        if minimum is not None:
            reason = f"{usable} of {len(final)} branches usable (minimum {minimum})"
        return Outcome("failed", worst.code or 1, output, None, False, reason)

    def _attempt_ended(self, frame: Frame, outcome: Outcome) -> None:
        """An attempt's outcome: done, or retried (after `recover`), or final."""
        frame.deadline = None
        node = frame.node
        attempts = int(node.get("retry") or 1)
        stop = self.ctx.stop_reason is not None
        if outcome.ok or stop or outcome.status == "cancelled" or frame.attempt >= attempts:
            self._finish(frame, outcome)
            return
        if node.get("recover"):
            frame.phase, frame.pending = RECOVER, outcome
            self._command(frame, node["recover"], None, False)
            return
        self._attempt(frame, frame.attempt + 1)

    def _recovered(self, frame: Frame, recovered: Outcome) -> None:
        outcome = frame.pending
        assert outcome is not None
        frame.pending = None
        if not recovered.ok:
            outcome.reason = f"{outcome.reason}; recover failed ({recovered.reason})"
            self._finish(frame, outcome)
            return
        self._attempt(frame, frame.attempt + 1)

    def _finish(self, frame: Frame, outcome: Outcome) -> None:
        self.ctx.record_node(frame.node, outcome, frame.attempt)
        self._deliver(frame, outcome)
        if self.ctx.stop_reason is not None and not self.stopping:
            self.stop()  # `failure: root` just aborted the run

    def _deliver(self, frame: Frame, outcome: Outcome) -> None:
        self.frames.pop(frame.key, None)
        parent = self.frames.get(frame.parent) if frame.parent else None
        if parent is not None:
            self._child_ended(parent, frame.key, outcome)
        elif frame.parent is None:
            self.outcome, self.done = outcome, True

    # --- cancelling -------------------------------------------------------------------

    def _timeout_outcome(self, frame: Frame) -> Outcome:
        timeout_ms = frame.node.get("timeout_ms") or 0
        return Outcome("timeout", TIMEOUT_CODE, None, reason=f"timed out after {timeout_ms:g} ms")

    def _time_out(self, frame: Frame) -> None:
        """The attempt's time is up: its commands are stopped, its children unwind, and
        it ends `timeout` once nothing of it runs."""
        frame.timed_out, frame.deadline = True, None
        if frame.command is not None:
            frame.command.stop(timed_out=True)
            return
        if not frame.children:  # nothing runs in it (cannot last: settled at once)
            self._attempt_ended(frame, self._timeout_outcome(frame))
            return
        for key in list(frame.children):  # the last to vanish ends the attempt
            child = self.frames.get(key)
            if child is not None:
                self._unwind(child)

    def _unwind(self, frame: Frame) -> None:
        """Cancel from above: stop what runs; the frame vanishes once nothing does."""
        if frame.key not in self.frames or frame.unwinding:
            return
        frame.unwinding = True
        grace = 0.0 if self.ctx.stop_reason == "killed" else None
        if frame.command is not None:
            frame.command.stop(grace)
        for key in list(frame.children):
            child = self.frames.get(key)
            if child is not None:
                self._unwind(child)
        if frame.key in self.frames and not frame.children and frame.command is None:
            self._vanish(frame)

    def _vanish(self, frame: Frame) -> None:
        """An unwound frame is gone without an outcome of its own (a cancelled task)."""
        self.frames.pop(frame.key, None)
        parent = self.frames.get(frame.parent) if frame.parent else None
        if parent is not None:
            self._child_ended(parent, frame.key, Outcome("cancelled", 143, None))
        elif frame.parent is None:
            self.outcome, self.done = None, True

    # --- across a park --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "keys": self._keys,
            "frames": [f.snapshot() for f in self.frames.values()],
            "done": self.done,
            "stopping": self.stopping,
            "outcome": None if self.outcome is None else _out(self.outcome),
        }

    def fds_kept(self) -> list[int]:
        return [fd for c in self.commands() for fd in c.fds_kept()]

    @classmethod
    def restore(cls, ctx: RunContext, root: dict[str, Any], saved: dict[str, Any]) -> Graph:
        graph = cls(ctx, root)
        graph._keys, graph.done, graph.stopping = saved["keys"], saved["done"], saved["stopping"]
        graph.outcome = _in(saved["outcome"])
        for state in saved["frames"]:
            frame = Frame.restore(ctx, state)
            graph.frames[frame.key] = frame
        return graph


def _when(condition: str, values: dict[str, Any]) -> bool:
    try:
        return truthy(substitute_word(condition, values))
    except BadInput:
        return False  # a condition on a missing value is false, as `{x??}` is


def _repeat_group(node: dict[str, Any], values: dict[str, Any]) -> dict[str, Any] | Outcome:
    """The node as a group of `repeat` instances, each with its own index variables."""
    spec = node["repeat"]
    try:
        count = int(spec if isinstance(spec, int) else substitute_word(spec, values))
    except (BadInput, ValueError) as exc:
        why = exc.message if isinstance(exc, BadInput) else f"{spec!r} is not a count"
        return Outcome("failed", 2, None, reason=f"repeat: {why}")
    parallel = bool(node.get("repeat_parallel"))
    limit = MAX_PARALLEL_REPEAT if parallel else MAX_REPEAT
    if not 0 <= count <= limit:
        return Outcome("failed", 2, None, reason=f"repeat: {count} is outside 0-{limit}")
    if count == 0:
        return Outcome("done", 0, None, reason="repeat 0: nothing to run")
    label = node.get("label")
    instances = [
        {
            **node,
            "repeat": None,
            "repeat_parallel": None,
            "id": f"{node['id']}#{index}",
            "label": f"{label}-{index}" if label else f"{node['id']}#{index}",
            "scope": {
                "index": index,
                "prev": (index - 1) % count,
                "next": (index + 1) % count,
                "repeat": count,
            },
        }
        for index in range(count)
    ]
    return {
        "id": node["id"],
        "label": label,
        "kind": "parallel" if parallel else "sequence",
        "children": instances,
        "concurrency": node.get("concurrency"),
        "min_successful": node.get("min_successful"),
        "retry": 1,
        "failure": node.get("failure") or "continue",
    }


def _minimum(node: dict[str, Any], values: dict[str, Any], branches: int) -> int | Outcome | None:
    """The group's `min_successful`: a placeholder (`{quorum}`) is rendered with the run's
    values; one that is not a count up to the number of branches fails the group before
    any branch starts."""
    spec = node.get("min_successful")
    if not isinstance(spec, str):
        return spec if isinstance(spec, int) else None
    try:
        minimum = int(substitute_word(spec, values))
    except (BadInput, ValueError) as exc:
        why = exc.message if isinstance(exc, BadInput) else f"{spec!r} is not a count"
        return Outcome("failed", 2, None, reason=f"min_successful: {why}")
    if not 0 <= minimum <= branches:
        return Outcome(
            "failed", 2, None, reason=f"min_successful: {minimum} is outside 0-{branches} branches"
        )
    return minimum


def _usable(outcome: Outcome) -> bool:
    """A branch counts toward `min_successful` when it succeeded and produced output."""
    return outcome.ok and outcome.output is not None and safe.lstat(outcome.output).st_size > 0


def _join_outputs(
    ctx: RunContext,
    node: dict[str, Any],
    labels: list[str],
    results: list[Outcome],
    flow: tuple[Path | None, bool],
) -> Path:
    """The branches' outputs under their headers, streamed; the branch captures are then
    read by no one and cut to the cap (as is the join when no later step reads it)."""
    path = ctx.paths.node_output(node["id"])
    ensure_dir(path.parent)
    stdin, feeds = flow
    out = Capture(path, None if feeds else LOG_CAP_BYTES)
    try:
        minimum = node.get("min_successful")
        if minimum is not None:
            usable = sum(1 for r in results if _usable(r))
            state = (
                "complete"
                if usable == len(results)
                else "degraded"
                if usable >= minimum
                else "insufficient_data"
            )
            out.write(
                f"--- parallel_status: {state} usable: {usable} expected: "
                f"{len(results)} minimum: {minimum} ---\n".encode()
            )
        for label, result in zip(labels, results, strict=True):
            out.write(f"--- branch: {label} status: {result.status} ---\n".encode())
            if result.output and result.output.exists():
                quoted_copy(out, result.output)  # no branch output can pass for a header
                if result.output != stdin:  # a skipped branch passes the stdin through
                    trim(result.output)
    finally:
        out.close()
    return path

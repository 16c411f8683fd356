"""A run's numbers, defined once: a step, an attempt, a retry and a timeout's exit code.

- A **step** is one leaf of the recipe's graph as it ran; each instance of a repeated
  leaf (`1.2#0`, `1.2#1`, ...) is a step of its own. A `recover` command is neither a
  step nor an attempt: it runs on behalf of the step it recovers.
- An **attempt** is one run of a step's command (a `command.start` that is not a
  recover).
- A **retry** is an attempt after a step's first: a step's retries are its attempts less
  one (a retried sequence runs its steps again, and each of those runs is a retry).
- A step is `completed`, `failed` or `cancelled` as its last attempt ended; a timed-out
  attempt fails its step (`failed` counts it, `timed_out` says how many of them were).
- A timeout's exit code is 124 (as coreutils' timeout(1)), on the command that was
  stopped as on its node and its run; 143 is a command stopped by a cancel.

The runner feeds its commands through `Steps` as they start and end and writes the
counts into progress.json and result.json; a reader that has only the files (the fold of
a dead runner's run) folds events.jsonl through the same class (`from_events`). `status`,
`result`, `ls`, the dashboard and /metrics all read those counters: none counts anew.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from runtime.core.errors import StateDamaged
from runtime.store.layout import RunPaths
from runtime.store.reads import read_jsonl

TIMEOUT_CODE = 124
"""The exit code of a timed-out attempt, its node and its run."""
CANCEL_CODE = 143
"""The exit code of a command stopped by a cancel (SIGTERM)."""
COUNTS = ("active", "completed", "failed", "timed_out", "cancelled", "attempts", "retries")
"""The counters, in the order a view shows them."""
FINAL_COUNTS = COUNTS[1:]
"""What a finished run's counters are (none is active): result.json holds them, and a
listing (index.json) keeps them."""


class StepCounts(TypedDict):
    active: int
    completed: int
    failed: int
    timed_out: int
    cancelled: int
    attempts: int
    retries: int


class Steps:
    """The fold: node id -> [attempts, its state now, its last attempt's state], and the
    counters kept as it goes (a command's start or end costs O(1) however many steps the
    run has). Plain data, so a parked runner keeps it across exec() (`snapshot` /
    `restore`)."""

    __slots__ = ("_counts", "_steps")

    def __init__(self) -> None:
        self._steps: dict[str, list[Any]] = {}
        self._counts = StepCounts(
            active=0, completed=0, failed=0, timed_out=0, cancelled=0, attempts=0, retries=0
        )

    def started(self, node: str, *, recover: bool = False) -> None:
        step = self._steps.setdefault(node, [0, None, None])
        if not recover:
            step[0] += 1
            self._counts["attempts"] += 1
            self._counts["retries"] += step[0] > 1
        self._move(step, "active")

    def ended(self, node: str, status: str, *, recover: bool = False) -> None:
        """A command of `node` ended `done`, `failed`, `timeout` or `cancelled`."""
        step = self._steps.setdefault(node, [0, None, None])
        if recover:  # the step stays as its failed attempt left it, unless stopped
            self._move(step, "cancelled" if status == "cancelled" else step[2] or "failed")
            return
        step[2] = _STATE.get(status, "failed")
        self._move(step, step[2])

    def _move(self, step: list[Any], state: str) -> None:
        for key in _COUNTED.get(step[1], ()):
            self._counts[key] -= 1  # type: ignore[literal-required]
        step[1] = state
        for key in _COUNTED.get(state, ()):
            self._counts[key] += 1  # type: ignore[literal-required]

    def counts(self) -> StepCounts:
        return StepCounts(**self._counts)

    def snapshot(self) -> dict[str, list[Any]]:
        return self._steps

    @classmethod
    def restore(cls, saved: dict[str, list[Any]]) -> Steps:
        steps = cls()
        for node, (attempts, state, last) in saved.items():
            steps._steps[node] = [attempts, None, last]
            steps._counts["attempts"] += attempts
            steps._counts["retries"] += max(0, attempts - 1)
            steps._move(steps._steps[node], state)
        return steps

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]], instance: str | None) -> Steps:
        """The fold of a run's journal (its `command.start` / `command.done` lines of
        this run instance)."""
        steps = cls()
        for event in events:
            if instance is not None and event.get("run_instance_id") != instance:
                continue
            node, name = event.get("node"), event.get("event")
            if not isinstance(node, str):
                continue
            recover = event.get("recover") is True
            if name == "command.start":
                steps.started(node, recover=recover)
            elif name == "command.done":
                steps.ended(node, str(event.get("status")), recover=recover)
        return steps


_STATE = {"done": "completed", "failed": "failed", "timeout": "timeout", "cancelled": "cancelled"}
_COUNTED: dict[str | None, tuple[str, ...]] = {
    "active": ("active",),
    "completed": ("completed",),
    "failed": ("failed",),
    "timeout": ("failed", "timed_out"),
    "cancelled": ("cancelled",),
}
"""A step's state -> the counters it counts in (a timed-out step is a failed one)."""


def journal_counts(paths: RunPaths, instance: str | None) -> StepCounts:
    """The counters of a run whose runner is gone, from its journal: a step that was
    running when it died is counted `cancelled` (nothing runs it any more). A damaged
    journal counts nothing."""
    try:
        records = read_jsonl(paths.events).records
    except StateDamaged:
        records = []
    counts = Steps.from_events(records, instance).counts()
    counts["cancelled"] += counts["active"]
    counts["active"] = 0
    return counts


def final_counts(counts: StepCounts) -> dict[str, int]:
    """The counters a finished run's result.json keeps (no step is active any more)."""
    return {k: counts[k] for k in FINAL_COUNTS}  # type: ignore[literal-required]


def counts_of(record: Mapping[str, Any]) -> dict[str, int]:
    """The counters a progress.json or result.json holds (those it has, as ints)."""
    return {
        k: v
        for k in COUNTS
        if isinstance(v := record.get(k), int) and not isinstance(v, bool) and v >= 0
    }


def steps_line(counts: Mapping[str, Any]) -> str:
    """The counters in words, as `status` and the dashboard show them:
    `0 active, 2 done, 1 failed (1 timed out); 4 attempts, 1 retry`."""
    parts = [f"{counts.get('active', 0)} active", f"{counts.get('completed', 0)} done"]
    failed = f"{counts.get('failed', 0)} failed"
    if counts.get("timed_out"):
        failed += f" ({counts['timed_out']} timed out)"
    parts.append(failed)
    if counts.get("cancelled"):
        parts.append(f"{counts['cancelled']} cancelled")
    line = ", ".join(parts)
    if "attempts" in counts:
        retries = int(counts.get("retries") or 0)
        line += (
            f"; {counts['attempts']} attempts, {retries} {'retry' if retries == 1 else 'retries'}"
        )
    return line


def exit_code(status: str | None, code: int | None) -> int | None:
    """A command's exit code as every view shows it: a timed-out one's is 124."""
    return TIMEOUT_CODE if status == "timeout" else code

"""What one execution shares (`RunContext`) and what every node returns (`Outcome`).

Its own module because the graph (runtime.runner.graph), its commands
(runtime.runner.command, runtime.runner.command) and the run's end (runtime.runner.lifecycle)
all use them; a parked runner keeps the context across exec() (`snapshot`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runtime.compiler.redact import redact_text
from runtime.core.errors import TRANSIENT, os_errno
from runtime.runner.output import LOG_CAP_BYTES, Held, LogFile
from runtime.store.events import preview_text, write_progress
from runtime.store.layout import RunPaths
from runtime.store.writes import DiskWriteError
from runtime.views.counts import Steps

if TYPE_CHECKING:
    from runtime.store.records import StopRecord

Status = Literal["done", "failed", "timeout", "cancelled"]
Escalation = Literal["continue", "branch", "root"]


class Outcome:
    """What a node produced: its status, exit code and complete stdout (a file).

    Plain classes here, not dataclasses: `dataclasses` (and the `inspect` it imports)
    were a sixth of the runner's start-up CPU (docs/performance.md)."""

    __slots__ = ("code", "degraded", "escalation", "output", "reason", "status")

    def __init__(
        self,
        status: Status,
        code: int,
        output: Path | None,
        escalation: Escalation | None = None,
        degraded: bool = False,
        reason: str | None = None,
    ) -> None:
        self.status, self.code, self.output = status, code, output
        self.escalation, self.degraded, self.reason = escalation, degraded, reason

    @property
    def ok(self) -> bool:
        return self.status == "done"

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Outcome({shown})"


class RunContext:
    """Shared state of one execution (the runner owns exactly one)."""

    def __init__(
        self,
        paths: RunPaths,
        instance: str,
        values: dict[str, Any],
        env: dict[str, str],
        cwd: str,
        secrets: list[str],
        grace: float = 5.0,
    ) -> None:
        self.paths, self.instance, self.values = paths, instance, values
        self.env, self.cwd, self.secrets, self.grace = env, cwd, secrets, grace
        self.stop_reason: str | None = None
        self.stopped: StopRecord | None = None
        """Who stopped the run (with the first stop reason), when known."""
        self.skipped: str | None = None
        """Why the graph never started: a run it came `--after` did not end `done`
        (runtime.runner.gate)."""
        self.abort: dict[str, Any] | None = None
        self.cwd_error: OSError | None = None
        """Why the run's directory could not be entered (every command then fails to
        start with it), or None."""
        self.steps = Steps()
        """Each step's attempts and state (runtime.views.counts defines them)."""
        self.branches: dict[str, str] = {}
        self.nodes: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.failed_commands: dict[str, dict[str, Any]] = {}
        """node id -> the `command.done` record of its last failed command (the
        failure's command line, code and stderr file, for result.json's `failure`)."""
        self._commands = 0
        self._logs: dict[str, LogFile] = {}
        self.on_command_done: Callable[[dict[str, Any]], None] | None = None

    def stop(self, reason: str, by: StopRecord | None = None) -> None:
        """Stop the run (the runner's loop then stops the graph); the first reason wins,
        and with it who stopped the run (result.json's `stopped`)."""
        if self.stop_reason is None:
            self.stop_reason, self.stopped = reason, by

    def record_node(self, node: dict[str, Any], outcome: Outcome, attempts: int) -> None:
        """How a node ended, in `nodes`; a failure in `failures`, where its policy
        decides how far it reaches (`root` aborts the whole run)."""
        self.nodes.append(
            {
                "id": node["id"],
                "label": node.get("label"),
                "kind": node["kind"],
                "status": outcome.status,
                "code": outcome.code,
                "attempts": attempts,
                "degraded": outcome.degraded,
                "reason": outcome.reason,
            }
        )
        if outcome.ok or outcome.status == "cancelled":
            return
        if outcome.escalation != "branch":
            outcome.escalation = node.get("failure") or "continue"
        self.failures.append(
            {
                "node": node["id"],
                "label": node.get("label"),
                "code": outcome.code,
                "status": outcome.status,
                "policy": outcome.escalation,
                "reason": outcome.reason,
            }
        )
        if outcome.escalation == "root" and self.abort is None:
            self.abort = {"node": node["id"], "label": node.get("label"), "code": outcome.code}
            self.stop("aborted")

    def next_command_id(self) -> str:
        self._commands += 1
        return f"command-{self._commands:03d}"

    def progress(self, phase: str = "running", **extra: Any) -> None:
        """progress.json now. Advisory (a live runner's `queued` is read from it, never
        a verdict), so a disk that takes no more leaves the last one in place; the run's
        end writes it patiently."""
        try:
            self._write_progress(phase, extra)
        except DiskWriteError as exc:
            if os_errno(exc) not in TRANSIENT:
                raise

    def _write_progress(self, phase: str = "running", extra: dict[str, Any] | None = None) -> None:
        write_progress(
            self.paths.progress,
            self.instance,
            phase=phase,
            **self.steps.counts(),
            branches=self.branches,
            **(extra or {}),
        )

    def log(self, stream: str) -> LogFile:
        """The run's `stdout.log` / `stderr.log`, shared by all its commands."""
        log = self._logs.get(stream)
        if log is None:
            path = self.paths.stdout if stream == "stdout" else self.paths.stderr
            log = self._logs[stream] = LogFile(path)
        return log

    def snapshot(self) -> dict[str, Any]:
        """What a parked runner keeps of the execution (runtime.runner.park)."""
        return {
            "steps": self.steps.snapshot(),
            "commands": self._commands,
            "branches": self.branches,
            "nodes": self.nodes,
            "failures": self.failures,
            "failed_commands": self.failed_commands,
            "stop_reason": self.stop_reason,
            "stopped": self.stopped,
            "abort": self.abort,
            "grace": self.grace,
            "logs": {name: [log.fd, log.size] for name, log in self._logs.items()},
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """The execution as an earlier image of this runner left it, its logs still open.
        An image parked by an older actors (an upgrade while the run idled) kept bare
        counters (`counts`): its steps are folded from the run's journal instead."""
        if "steps" in saved:
            self.steps, self._commands = Steps.restore(saved["steps"]), saved["commands"]
        else:
            self.steps, self._commands = self._steps_from_journal(), saved["counts"][3]
        self.branches, self.nodes = saved["branches"], saved["nodes"]
        self.failures, self.failed_commands = saved["failures"], saved["failed_commands"]
        self.stop_reason, self.abort, self.grace = (
            saved["stop_reason"],
            saved["abort"],
            saved["grace"],
        )
        self.stopped = saved.get("stopped")  # an image of an older runner has none
        for name, (fd, size) in saved["logs"].items():
            path = self.paths.stdout if name == "stdout" else self.paths.stderr
            self._logs[name] = LogFile.adopt(path, LOG_CAP_BYTES, fd, size)

    def _steps_from_journal(self) -> Steps:
        from runtime.core.errors import StateDamaged
        from runtime.store.reads import read_jsonl

        try:
            records = read_jsonl(self.paths.events).records
        except StateDamaged:
            records = []
        return Steps.from_events(records, self.instance)

    def held(self) -> list[Held]:
        """The logs' output a full disk did not take yet (runtime.runner.output.Held)."""
        return [log.held for log in self._logs.values()]

    def fds_kept(self) -> list[int]:
        return [log.fd for log in self._logs.values()]

    def close(self) -> None:
        for log in self._logs.values():
            log.close()
        self._logs.clear()

    def display(self, argv: list[str]) -> str:
        """The command line as recorded: secrets masked, cut to a bounded preview."""
        return preview_text(redact_text(shlex.join(argv), self.secrets))

"""Everything a page shows about one run, read in one call and masked once.

The views are `inspect`'s (tail, messages, mailbox, artifacts), plus the lifecycle
journal and result.json with its `failure` (the failing command and its stderr's last
lines), so the page and `actors inspect` / `actors result` read the same files the same
way. Child runs are left to the caller, which keeps a listing already (inspect's status
view lists every run of the root to find them).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from runtime.compiler.redact import redact_deep, redact_values, run_secrets
from runtime.core.errors import BadInput, StateDamaged
from runtime.core.ids import now_iso
from runtime.store.layout import StateRoot
from runtime.store.reads import read_text_tail, tail_jsonl
from runtime.views.counts import exit_code
from runtime.views.inspect import inspect
from runtime.views.status import find_run, full_status, read_result

if TYPE_CHECKING:
    pass

TAIL_LINES = 200
EVENTS = 200


class RunPage(TypedDict):
    status: dict[str, Any]
    values: dict[str, Any]
    stdout: list[str]
    stderr: list[str]
    events: list[dict[str, Any]]
    inbox: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    artifacts: dict[str, Any]
    result: dict[str, Any] | None
    result_problem: str | None
    result_line: str | None
    """The run's own one-line result: its last declared message's summary or body, else
    its output's last line (as its follow-up carries it), made inert; None while it runs."""
    steps: list[dict[str, Any]]
    """Every command of the newest events, oldest first: when it started, its step
    (node, label), attempt, whether it was a `recover`, how it ended and how long it took
    (runtime.views.counts defines a step, an attempt and a retry)."""
    tail_updated_at: str | None
    """When stdout.log was last written (the newest line is at most this old)."""
    has_room: bool


def run_page(root: StateRoot, run_id: str, *, lines: int = TAIL_LINES) -> RunPage:
    """One run's page; every text in it masked of the run's secrets. Its result line is
    the one its follow-up quotes (one definition, runtime.delivery.followups)."""
    from runtime.delivery.followups import result_line

    paths, run = find_run(root, run_id)
    target = f"run:{run_id}"
    tail = inspect(root, target, "tail", lines=lines)
    result: Any = None
    problem = None
    try:
        result = read_result(paths)
    except StateDamaged as exc:
        problem = exc.message
    events = tail_jsonl(paths.events, EVENTS)
    page: dict[str, Any] = {
        "status": dict(full_status(paths, run)),
        "values": redact_values(run.get("values") or {}, run.get("secret_names", [])),
        "stdout": tail["stdout"],
        "stderr": inspect(root, target, "tail", lines=min(lines, 50))["stderr"],
        "events": events,
        "inbox": inspect(root, target, "mailbox", lines=lines)["entries"],
        "outbox": inspect(root, target, "messages", lines=lines)["messages"],
        "artifacts": inspect(root, target, "artifacts")["artifacts"],
        "result": result,
        "result_problem": problem,
        "result_line": None if result is None else result_line(paths, run, result),
        "steps": steps_of(events, run.get("run_instance_id")),
        "tail_updated_at": _modified(paths.stdout),
        "has_room": paths.room_timeline.exists(),
    }
    masked: RunPage = redact_deep(page, run_secrets(run))
    return masked


def steps_of(events: list[dict[str, Any]], instance: str | None) -> list[dict[str, Any]]:
    """Each command of `events` with its start and its end merged, oldest first."""
    commands: dict[str, dict[str, Any]] = {}
    for event in events:
        ident, name = event.get("command_id"), event.get("event")
        if not isinstance(ident, str) or event.get("run_instance_id") != instance:
            continue
        if name == "command.start":
            commands[ident] = {
                "command_id": ident,
                "node": event.get("node"),
                "label": event.get("label"),
                "attempt": event.get("attempt"),
                "recover": event.get("recover") is True,
                "command": event.get("command"),
                "started_at": event.get("ts"),
                "status": "running",
                "code": None,
                "duration_ms": None,
            }
        elif name == "command.done" and ident in commands:
            commands[ident].update(
                status=event.get("status"),
                code=exit_code(event.get("status"), event.get("code")),
                duration_ms=event.get("duration_ms"),
                ended_at=event.get("ts"),
            )
    return list(commands.values())


def _modified(path: Path) -> str | None:
    try:
        stamp = os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return None
    return now_iso(stamp - time.time())  # the one formatter of a stored time


COMMAND_ID = re.compile(r"command-[0-9]{1,9}")
"""How the runner names a command's captures (runtime.runner.context.next_command_id)."""


class CommandOutput(TypedDict):
    command_id: str
    stdout: list[str]
    stderr: list[str]


def command_output(root: StateRoot, run_id: str, command_id: str) -> CommandOutput:
    """One command's own output (its captures, the step's log a GitHub Actions job
    folds out), its last lines, masked of the run's secrets."""
    if not COMMAND_ID.fullmatch(command_id):
        raise BadInput(f"{command_id[:40]!r} is no command id", hint="e.g. command-001")
    paths, run = find_run(root, run_id)
    capture = paths.capture(command_id)
    out: CommandOutput = {
        "command_id": command_id,
        "stdout": read_text_tail(capture.stdout, TAIL_LINES),
        "stderr": read_text_tail(capture.stderr, 50),
    }
    masked: CommandOutput = redact_deep(out, run_secrets(run))
    return masked

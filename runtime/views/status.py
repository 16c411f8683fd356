"""A run's status, derived on every read from its files and its live process.

Order of evidence: result.json (written once, by whoever ends the run) is final; else a
runner whose recorded identity still verifies is `running`; else the last stop request in
events.jsonl says `killed` or `cancelled`; else what events.jsonl proves of the outcome
(`proven_end`: the runner died after journaling it); else the runner vanished without a
word and the run is `exited`. A pid that now belongs to another process, or one we
cannot verify, is never reported as running.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from runtime.core.errors import NotFound, StateDamaged
from runtime.core.ids import parse_iso
from runtime.core.process import plausible_pid, verify
from runtime.store.events import STOP_EVENTS
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.reads import read_json, tail_jsonl
from runtime.views.counts import COUNTS, FINAL_COUNTS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from runtime.store.records import (
        ProgressRecord,
        ResultRecord,
        RunRecord,
        RunStatus,
        StopRecord,
    )

TERMINAL = ("done", "failed", "cancelled", "killed", "exited", "skipped")
ACTIVE = ("starting", "queued", "running")
STARTING_GRACE_S = 10.0


_NONE = type(None)
_RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "run": (str,),
    "run_instance_id": (str,),
    "owner_id": (str, _NONE),
    "created_at": (str, _NONE),
    "recipe": (str, _NONE),
    "tool": (str, _NONE),
    "parent": (str, _NONE),
    "pid": (int, _NONE),
    "values": (dict, _NONE),
    "secret_names": (list, _NONE),
    "mailbox": (dict, _NONE),
    "artifacts": (dict, _NONE),
    "process_identity": (dict, _NONE),
}
_MAILBOX_FIELDS: dict[str, tuple[type, ...]] = {
    "accepts": (list, _NONE),
    "emits": (list, _NONE),
    "endpoint": (str, _NONE),
}


def _shape_problem(record: dict[str, Any]) -> str | None:
    """What makes a parsed run.json unusable by the readers, or None."""
    for key, types in _RUN_FIELDS.items():
        if not isinstance(record.get(key), types):
            return f"field {key!r} is {type(record.get(key)).__name__}"
    mailbox = record.get("mailbox") or {}
    for key, types in _MAILBOX_FIELDS.items():
        if not isinstance(mailbox.get(key), types):
            return f"field 'mailbox.{key}' is {type(mailbox.get(key)).__name__}"
    for item in [*(mailbox.get("accepts") or []), *(mailbox.get("emits") or [])]:
        if not isinstance(item, str) and not (
            isinstance(item, dict) and isinstance(item.get("type"), str)
        ):
            return 'a mailbox type is neither a string nor {"type": ...}'
    if record.get("pid") is not None and not plausible_pid(record.get("pid")):
        return "field 'pid' is not a process id"
    identity = record.get("process_identity")
    if identity is not None and not plausible_pid(identity.get("pid")):
        return "field 'process_identity.pid' is not a process id"
    return None


def load_run(paths: RunPaths) -> RunRecord:
    """run.json of a run; NotFound / StateDamaged with a clear message otherwise."""
    if not paths.dir.is_dir():
        raise NotFound(f"no run {paths.run_id}", hint="`actors ls` lists the runs")
    record = read_json(paths.run_json)
    where = paths.run_json
    if not isinstance(record, dict):
        if record is None:
            raise StateDamaged(
                f"run {paths.run_id} has no run.json", hint="it may be starting", path=where
            )
        raise StateDamaged(f"run {paths.run_id}: run.json is not an object", path=where)
    problem = _shape_problem(record)
    if problem:
        raise StateDamaged(f"run {paths.run_id}: run.json is damaged ({problem})", path=where)
    return cast("RunRecord", record)  # the fields readers rely on are checked above


_RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "code": (int, _NONE),
    "reason": (str, _NONE),
    "ended_at": (str, _NONE),
    "output": (str, _NONE),
    "artifacts": (dict, _NONE),
    "failures": (list, _NONE),
}


def read_result(paths: RunPaths) -> ResultRecord | None:
    """result.json, None when there is none yet; StateDamaged when it is unusable."""
    result = read_json(paths.result)
    if result is None:
        return None
    where = f"run {paths.run_id}: result.json"
    problem = _result_problem(result)
    if problem is not None:
        raise StateDamaged(f"{where} {problem}", hint="the file is kept", path=paths.result)
    return cast("ResultRecord", result)


def _result_problem(result: Any) -> str | None:
    """What makes a parsed result.json unusable by its readers, or None."""
    if not isinstance(result, dict):
        return "is not an object"
    if result.get("status") not in TERMINAL:
        return "has no final status"
    for key, types in _RESULT_FIELDS.items():
        value = result.get(key)
        if not isinstance(value, types):
            return f"is damaged (field {key!r} is {type(value).__name__})"
    if not _exit_code(result.get("code")):
        return "is damaged (field 'code' is not an exit code)"
    artifacts = list((result.get("artifacts") or {}).values())
    if not all(isinstance(a, dict) for a in [*artifacts, *(result.get("failures") or [])]):
        return "is damaged (artifacts or failures are not objects)"
    if not isinstance(result.get("failure"), (dict, _NONE)):
        return "is damaged (field 'failure' is not an object)"
    return None


def _exit_code(code: Any) -> bool:
    """None, or an int a process could have exited with (a signal's negative included)."""
    return code is None or (not isinstance(code, bool) and -256 < code < 65536)


_PROGRESS_FIELDS: dict[str, tuple[type, ...]] = {
    "phase": (str,),
    "active": (int,),
    "completed": (int,),
    "failed": (int,),
    "timed_out": (int,),
    "cancelled": (int,),
    "attempts": (int,),
    "retries": (int,),
    "branches": (dict,),
    "waiting_for": (str,),
}


MAX_COUNT = (1 << 31) - 1
"""The largest step counter believed: more steps than any run could start is damage."""
PROGRESS_BYTES = 1024 * 1024
"""progress.json is a few counters and branch states, read for every active run a
listing shows: a larger one is damage, refused unread."""


def read_progress(paths: RunPaths) -> ProgressRecord:
    """The usable counters of progress.json; without them when it is missing or damaged
    (it is advisory: the status itself never depends on it). A damaged file, or counters
    of the wrong type or out of range, is said in `damaged` (the view shows it)."""
    try:
        progress = read_json(paths.progress, max_bytes=PROGRESS_BYTES)
    except StateDamaged as exc:
        return {"damaged": exc.message}
    if progress is None:
        return {}
    if not isinstance(progress, dict):
        return {"damaged": f"run {paths.run_id}: progress.json is not an object"}
    usable: dict[str, Any] = {}
    for key, value in progress.items():
        if key in _PROGRESS_FIELDS and not _usable_progress(key, value):
            usable["damaged"] = f"run {paths.run_id}: progress.json is damaged (field {key!r})"
        elif key != "damaged":
            usable[key] = value
    return cast("ProgressRecord", usable)


def _usable_progress(key: str, value: Any) -> bool:
    if not isinstance(value, _PROGRESS_FIELDS[key]) or isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value <= MAX_COUNT
    if isinstance(value, dict):  # branches: label -> state
        return all(isinstance(state, str) for state in value.values())
    return True


def find_run(root: StateRoot, run_id: str) -> tuple[RunPaths, RunRecord]:
    paths = root.run(run_id)
    return paths, load_run(paths)


def runner_identity(paths: RunPaths, run: RunRecord) -> dict[str, Any] | None:
    """The runner's recorded identity (run.json, else its own start event)."""
    identity = run.get("process_identity")
    if isinstance(identity, dict) and identity:
        return dict(identity)
    for event in reversed(_events(paths, 50)):
        found = event.get("process_identity")
        if (
            event.get("event") == "run.runner.start"
            and isinstance(found, dict)
            and plausible_pid(found.get("pid"))
        ):
            return dict(found)
    return None


def _events(paths: RunPaths, count: int) -> list[dict[str, Any]]:
    """The last events, none when events.jsonl is damaged (a FIFO, a directory, a link
    planted there): the status is then derived from the other evidence."""
    try:
        return tail_jsonl(paths.events, count)
    except StateDamaged:
        return []


def stop_intent(paths: RunPaths, instance: str | None) -> dict[str, Any] | None:
    """stop.json (`cancel` / `kill`'s request, written before any signal, without a
    lock) when it is this run instance's (or names none), else None."""
    try:
        intent = read_json(paths.stop_request)
    except StateDamaged:
        return None
    if isinstance(intent, dict) and intent.get("run_instance_id") in (instance, None):
        return cast("dict[str, Any]", intent)
    return None


def stopper(intent: dict[str, Any] | None) -> StopRecord | None:
    """Who a stop request says stopped the run, or None when it names nobody."""
    if intent is None or not isinstance(intent.get("by"), str):
        return None
    return {"by": intent["by"], "forced": intent.get("forced") is True}


def _stop_request(paths: RunPaths, run: RunRecord) -> str | None:
    """`killed` / `cancelled` when a stop was asked for: stop.json, else the journal's
    stop events of older versions."""
    intent = stop_intent(paths, run.get("run_instance_id"))
    if intent is not None:
        status = STOP_EVENTS.get(f"run.{intent.get('action')}")
        if status:
            return status
    for event in reversed(_events(paths, 200)):
        status = STOP_EVENTS.get(str(event.get("event")))
        if status:
            return status
    return None


def command_text(run: Mapping[str, Any]) -> str | None:
    """An inline-template run's command as typed (`sleep {secs=5}`), for listings: `ls`
    shows it where a recipe run shows its recipe. None for a recipe or tool run. A word
    with blanks or quotes is single-quoted, so the text reads back as the same words."""
    root = run.get("template")
    if run.get("recipe") or run.get("tool") or not isinstance(root, dict):
        return None
    words = root.get("words")
    if root.get("kind") != "leaf" or not isinstance(words, list):
        return None
    shown = []
    for word in map(str, words):
        plain = word and not any(c.isspace() or c in "'\"\\" for c in word)
        shown.append(word if plain else "'" + word.replace("'", "'\\''") + "'")
    return " ".join(shown)


_PLAIN = {
    "timeout_ms",
    "failure",
    "output",
    "kind",
    "words",
    "id",
    "label",
    "scope_defaults",
    "scope",
}
_UNSET = {
    "retry": (None, 1),
    "recover": (None,),
    "when": (None,),
    "repeat": (None,),
    "delay_ms": (None, 0),
    "repeat_parallel": (None, False),
}


def plain_command(node: Mapping[str, Any]) -> bool:
    """Is this template one command, run once (a timeout, an output choice and a
    failure policy allowed; no retry, recovery, condition or repetition)? Its
    `command.done` is then the run's outcome (its one command decides it)."""
    if node.get("kind") != "leaf":
        return False
    return all(k in _PLAIN or node.get(k) in _UNSET.get(k, (None,)) for k in node)


PROVEN_BY_RUNNER = {
    "run.done": "done",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
    "run.killed": "killed",
    "run.skipped": "skipped",
}
"""The runner's own terminal events (written just before result.json) and their status."""


def proven_end(paths: RunPaths, run: RunRecord) -> dict[str, Any] | None:
    """What events.jsonl proves about the end of a run whose runner is gone without a
    result.json (docs/state-files.md, *How status is derived*), or None:
    - the runner's own terminal event (`run.done`, `run.failed`, ...): it decided the
      outcome and died between that line and result.json;
    - else, for a template of one plain command (`plain_command`), that command's
      `command.done` with status `done` or `failed`: the command's exit is the run's
      outcome (a required artifact missing still fails a done run). A `cancelled` one
      (a timeout or a stop) proves nothing, nor does any step of a larger graph."""
    instance = run.get("run_instance_id")
    root = run.get("template")
    plain = isinstance(root, dict) and plain_command(root)
    for event in reversed(tail_jsonl(paths.events, 200)):
        if event.get("run_instance_id") != instance:
            continue
        name = event.get("event")
        code = event.get("code")
        if name in PROVEN_BY_RUNNER and (isinstance(code, int) or code is None):
            return {
                "status": PROVEN_BY_RUNNER[str(name)],
                "code": code if isinstance(code, int) else 1,
                "degraded": bool(event.get("degraded")),
                "reason": event.get("reason") if isinstance(event.get("reason"), str) else None,
                "ended_at": event.get("ts"),
            }
        if (
            plain
            and name == "command.done"
            and event.get("node") == root.get("id")
            and event.get("status") in ("done", "failed")
            and isinstance(code, int)
        ):
            status = "done" if event["status"] == "done" and code == 0 else "failed"
            return {
                "status": status,
                "code": code if status == "failed" else 0,
                "degraded": False,
                "reason": None if status == "done" else f"exit code {code}",
                "ended_at": event.get("ts"),
                "command": event,
            }
    return None


def derive(paths: RunPaths, run: RunRecord) -> RunStatus:
    """Status summary of one run (no side effects)."""
    out: RunStatus = {
        "run": run.get("run", paths.run_id),
        "address": f"run:{paths.run_id}",
        "state_dir": str(paths.dir),
        "recipe": run.get("recipe"),
        "tool": run.get("tool"),
        "command": command_text(run),
        "owner_id": run.get("owner_id"),
        "parent": run.get("parent"),
        "created_at": run.get("created_at"),
        "pid": run.get("pid"),
        "code": None,
        "degraded": False,
        "ended_at": None,
        "reason": None,  # a documented key of every summary (docs/cli.md), active runs too
    }
    try:
        result = read_result(paths)
    except StateDamaged as exc:
        result = None
        out["damaged"], out["damaged_file"] = exc.message, damaged_file(exc, paths)
    if result is not None:
        out.update(
            {
                "status": result["status"],
                "code": result.get("code"),
                "degraded": bool(result.get("degraded")),
                "ended_at": result.get("ended_at"),
                "reason": result.get("reason"),
                "from_result": True,
                "started_at": result.get("started_at"),
                "duration_ms": _count(result.get("duration_ms")),
                **{k: _count(result.get(k)) for k in FINAL_COUNTS},  # type: ignore[typeddict-item]
            }
        )
        return out
    identity = runner_identity(paths, run)
    verdict, reason = verify(identity) if identity else ("unverifiable", "no pid yet")
    if verdict == "valid":
        out["status"] = "running"
        if run.get("group") or run.get("after"):
            _queued(paths, run, out)
    elif identity is None and _young(run):
        out["status"] = "starting"
    else:
        stopped = _stop_request(paths, run)
        proven = None if stopped else proven_end(paths, run)
        if proven is not None:  # the runner died after its outcome was journaled
            out["status"], out["code"] = proven["status"], proven["code"]
            out["degraded"], out["ended_at"] = proven["degraded"], proven["ended_at"]
            out["reason"] = proven_reason(proven, reason)
            out["proven"] = True
        else:
            out["status"] = stopped or "exited"
            out["code"] = {"killed": 137, "cancelled": 143}.get(out["status"])
            out["reason"] = reason
    out["process"] = verdict
    return out


def _count(value: Any) -> int | None:
    """A non-negative count or duration of result.json, else None (an older or damaged
    file; the views then show none)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
    return value if ok else None


def _queued(paths: RunPaths, run: RunRecord, out: RunStatus) -> None:
    """A live runner that waits at its gate (runtime.runner.gate) is `queued` until its
    progress.json says `running` (written just before its graph starts); a run without
    `group` or `after` never reads it here."""
    progress = read_progress(paths)
    if progress.get("run_instance_id") != run.get("run_instance_id"):
        progress = {}
    if progress.get("phase") != "running":
        out["status"] = "queued"
        after, group = run.get("after"), run.get("group")
        out["waiting_for"] = progress.get("waiting_for") or (
            f"run {', '.join(map(str, after))}" if after else f"a slot of group {group}"
        )


def proven_reason(proven: dict[str, Any], why_gone: str) -> str:
    """The reason of a status folded from events.jsonl: the outcome's own, then how it
    was known."""
    own = proven.get("reason")
    source = "its command.done" if proven.get("command") else "its terminal event"
    told = f"the runner died before result.json ({why_gone}); the outcome is {source}"
    return f"{own}; {told}" if own else told


def damaged_file(exc: StateDamaged, paths: RunPaths) -> str:
    """The damaged file a view names, relative to the run's directory (`run.json` when
    the error does not say)."""
    if exc.path is None:
        return "run.json"
    prefix = f"{paths.dir}/"
    return exc.path[len(prefix) :] if exc.path.startswith(prefix) else exc.path


def _young(run: RunRecord) -> bool:
    try:
        return time.time() - parse_iso(str(run.get("created_at"))) < STARTING_GRACE_S
    except ValueError:
        return False


def status_of(root: StateRoot, run_id: str) -> RunStatus:
    """Full status: derived state plus progress counters."""
    return full_status(*find_run(root, run_id))


def shown_status(paths: RunPaths, run: RunRecord) -> RunStatus:
    """`full_status` as it is shown to anyone (the CLI, the MCP server): the run's secrets
    masked, since a reason or a command may quote one."""
    from runtime.compiler.redact import redact_deep, run_secrets

    shown: RunStatus = redact_deep(full_status(paths, run), run_secrets(run))
    return shown


def full_status(paths: RunPaths, run: RunRecord) -> RunStatus:
    """`status_of` for a caller that has already read run.json."""
    out = derive(paths, run)
    progress = read_progress(paths)
    for key in ("phase", *COUNTS, "branches"):
        if key in progress:
            out[key] = progress[key]  # type: ignore[literal-required]
    if "damaged" in progress and "damaged" not in out:
        out["damaged"], out["damaged_file"] = progress["damaged"], "progress.json"
    return out

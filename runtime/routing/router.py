"""Route one envelope to its address: the `message` verb.

- `run:<id>`: the run's durable inbox. `control.*` types are consumed by the runner
  itself; every other type must be declared in the recipe's `mailbox.accepts` (unless
  forced) and waits for the recipe's own consumer (`actors recv`).
- `branch:<run>/<b>`: the branch inbox `branches/<b>/inbox.jsonl` (its worker consumes
  it), with a `routed` record in the parent run's inbox for observers.
- `room:<run>`: appended to the room timeline `rooms/main/messages.jsonl`.
- `coordinator` / `session:<id>`: from inside a run only: appended to the run's outbox.
- `tool:<name>`: spawns that recipe with an object body as its values.

The in-run verbs (`emit`, `recv`, `finish`) live in `in_run`, the streaming `Sender` in
`sender`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime.core.errors import ActorsError, BadInput, Conflict
from runtime.core.faults import pause_point
from runtime.core.ids import is_valid_id
from runtime.messaging.addresses import Address, parse_address
from runtime.messaging.boxes import CONTROL_TYPES, accepted_types, branch_mailbox, run_mailbox
from runtime.messaging.envelope import make_envelope
from runtime.runs.ownership import Principal, check_control
from runtime.store import safe
from runtime.store.appends import append_jsonl, encode_line
from runtime.store.journals import INBOX
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.writes import DiskWriteError, ensure_dir
from runtime.views.status import TERMINAL, derive, find_run

if TYPE_CHECKING:
    from runtime.messaging.envelope import Envelope
    from runtime.messaging.mailbox import Mailbox
    from runtime.routing.outcomes import SendOutcome
    from runtime.store.records import RunRecord

PIPE_BUF = 4096
"""Writes up to this size to a FIFO are atomic (POSIX minimum; Linux's value)."""


def check_accepts(run: RunRecord, kind: str, force: bool) -> None:
    """Refuse a type the recipe did not declare: nothing in the run would ever read it."""
    if kind in CONTROL_TYPES or force:
        return
    accepts = accepted_types(run)
    if kind not in accepts:
        listed = ", ".join(accepts) if accepts else "none besides control.*"
        raise BadInput(
            f"run {run['run']} does not accept {kind!r} (accepts: {listed})",
            hint="send a declared type, or pass --force",
        )


def full_address(to: str) -> str:
    """`to` with a bare run id written out (`hello-k3x9fq` is `run:hello-k3x9fq`); the one
    rule every caller of `send` that looks at the address first (the dashboard) uses."""
    if ":" not in to and to != "coordinator" and is_valid_id(to):
        return f"run:{to}"
    return to


def send(
    root: StateRoot,
    to: str,
    kind: str,
    body: Any,
    principal: Principal,
    *,
    force: bool = False,
    summary: str | None = None,
    reply_to: str | None = None,
    fsync: bool = True,
    idempotency_key: str | None = None,
) -> SendOutcome:
    """Validate, persist and wake; returns what happened (`state` says where it went).
    A bare id is a run (`hello-k3x9fq` is `run:hello-k3x9fq`), as for every command that
    takes a run."""
    to = full_address(to)
    address = parse_address(to)
    if address.kind in ("coordinator", "session"):
        from runtime.routing.in_run import emit  # deferred: only coordinator and session

        return emit(root, kind, body, principal, to=to, summary=summary)
    if address.kind == "tool":
        make_envelope(
            to=to, type=kind, body=body, sender=principal.id, summary=summary
        )  # validates
        return _invoke_tool(root, address, body, principal)
    assert address.target is not None
    paths, run = find_run(root, address.target)
    envelope = make_envelope(
        to=to,
        type=kind,
        body=body,
        sender=principal.id,
        summary=summary,
        reply_to=reply_to,
        idempotency_key=idempotency_key,
    )
    forced = check_control(run, principal, force=force, action="message", root=root)
    if forced and kind in ("control.stop", "control.kill"):
        envelope["forced"] = True  # the runner keeps it with the stop (its owner is told)
    if address.kind == "room":
        from runtime.routing.rooms import post_room  # deferred: rooms are the rare case

        return post_room(paths, run, envelope)
    if address.kind == "branch" and kind.startswith("control."):
        raise BadInput(
            f"{kind} goes to the run, not a branch", hint=f"send it to run:{paths.run_id}"
        )
    check_accepts(run, kind, force)
    status = derive(paths, run)["status"]
    if status in TERMINAL:
        if kind in ("control.archive", "control.prune"):
            return _apply_terminal_control(root, paths, kind, body)
        raise Conflict(
            f"run {paths.run_id} is {status}; nothing reads its mailbox any more",
            hint=f"see `actors result {paths.run_id}`",
        )
    if kind in ("control.archive", "control.prune"):
        raise Conflict(
            f"run {paths.run_id} is {status}; {kind} applies to finished runs only",
            hint=f"stop it first: actors message run:{paths.run_id} control.stop",
        )
    instance = run["run_instance_id"]
    if address.kind == "branch":
        assert address.branch is not None
        branch = branch_mailbox(paths, address.branch)
        ensure_dir(branch.inbox.parent)
        entry = branch.deliver(envelope, fsync=fsync, instance=instance)
        append_jsonl(paths.inbox, {**entry, "state": "routed"}, compactor=INBOX)
        return {"to": to, "type": kind, "id": envelope["id"], "state": "queued", "route": "branch"}
    box = run_mailbox(paths)
    fifo = (run.get("mailbox") or {}).get("endpoint") == "fifo" and kind not in CONTROL_TYPES
    entry = box.deliver(
        envelope, fsync=fsync, instance=instance, state="sending" if fifo else "queued"
    )
    state = (
        "sent" if fifo and _fast_path(box, paths.control_fifo, entry["id"], envelope) else "queued"
    )
    return {"to": to, "type": kind, "id": entry["id"], "state": state, "route": "run"}


def _fast_path(box: Mailbox, fifo: Path, entry_id: str, envelope: Envelope) -> bool:
    """Write a `sending` entry to the FIFO, or leave it to `recv`; True when written.

    The order makes a kill at any step deliver at most once (docs/messaging.md, The FIFO
    fast path): the commit marker exists before the write, so a dead sender's entry is
    requeued only if the FIFO cannot hold it; after a failed write the marker goes
    before the entry is requeued.
    """
    line = encode_line(envelope)
    pause_point("messaging.fifo.before_write")
    fd = _open_fifo(fifo) if len(line) <= PIPE_BUF else None
    written = False
    if fd is not None:
        try:
            if _commit(box, entry_id):
                pause_point("messaging.fifo.after_commit")
                written = _write_all(fd, line)
        finally:
            os.close(fd)
    if written:
        pause_point("messaging.fifo.after_write")
        with contextlib.suppress(DiskWriteError):  # it is in the FIFO: never report failure
            box.mark(entry_id, "sent")
            box.uncommit_fifo(entry_id)
        return True
    if fd is not None:
        pause_point("messaging.fifo.after_failed_write")
    box.uncommit_fifo(entry_id)  # the write did not happen: `queued` is safe again
    pause_point("messaging.fifo.before_requeue")
    box.requeue(entry_id, envelope)  # no reader attached: it waits for `actors recv`
    return False


def _commit(box: Mailbox, entry_id: str) -> bool:
    """The commit marker, or False when it cannot be made (a full disk): then the FIFO is
    not written and the entry goes to the inbox path instead."""
    try:
        box.commit_fifo(entry_id)
    except (OSError, DiskWriteError):
        return False
    return True


def _open_fifo(path: Path) -> int | None:
    """The endpoint, open for writing: never through a planted link, and only a FIFO (a
    planted regular file would swallow the envelope and have it reported `sent`)."""
    try:
        fd = safe.open_file(path, os.O_WRONLY | os.O_NONBLOCK)
    except (OSError, ActorsError):
        return None  # ENXIO: nobody is reading; ENOENT: no endpoint; a planted link
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _write_all(fd: int, line: bytes) -> bool:
    """One atomic write (at most PIPE_BUF bytes to a pipe: all or nothing)."""
    try:
        return os.write(fd, line) == len(line)
    except OSError:
        return False


def _apply_terminal_control(root: StateRoot, paths: RunPaths, kind: str, body: Any) -> SendOutcome:
    from runtime.runs.retention import archive_run, prune_run  # deferred: start-up cost

    if kind == "control.archive":
        target = archive_run(root, paths.run_id)
        return {
            "to": f"run:{paths.run_id}",
            "type": kind,
            "state": "handled",
            "archived_to": str(target),
        }
    preserve = isinstance(body, dict) and bool(body.get("preserve_artifacts"))
    outcome = prune_run(root, paths.run_id, preserve_artifacts=preserve)
    return cast(
        "SendOutcome", {"to": f"run:{paths.run_id}", "type": kind, "state": "handled", **outcome}
    )


def _invoke_tool(root: StateRoot, address: Address, body: Any, principal: Principal) -> SendOutcome:
    """Spawn the tool with the body as its values, checked against its parameters like
    `actors run` does: an unknown or badly typed key is refused before anything runs."""
    from runtime.runs.invoke import invoke_tool  # deferred: start-up cost (the compiler)

    assert address.target is not None
    values = body if isinstance(body, dict) else ({} if body is None else {"input": body})
    record = invoke_tool(
        address.target,
        values,
        session=None if principal.via_run_token else principal.id,
        root=root,
    )
    return {
        "to": str(address),
        "state": "spawned",
        "run": record["run"],
        "address": record["address"],
    }

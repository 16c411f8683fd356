"""Route one envelope to its address; the `message`, `emit` and `recv` verbs.

- `run:<id>`: the run's durable inbox. `control.*` types are consumed by the runner
  itself; every other type must be declared in the recipe's `mailbox.accepts` (unless
  forced) and waits for the recipe's own consumer (`actors recv`).
- `branch:<run>/<b>`: the branch inbox `branches/<b>/inbox.jsonl` (its worker consumes
  it), with a `routed` record in the parent run's inbox for observers.
- `room:<run>`: appended to the room timeline `rooms/main/messages.jsonl`.
- `coordinator` / `session:<id>`: from inside a run only: appended to the run's outbox.
- `tool:<name>`: spawns that recipe with an object body as its values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.errors import BadInput, Conflict, Refused
from runtime.core.faults import pause_point
from runtime.messaging.addresses import Address, parse_address
from runtime.messaging.boxes import (
    CONTROL_TYPES,
    accepted_types,
    branch_mailbox,
    room_dir,
    run_mailbox,
)
from runtime.messaging.envelope import make_envelope
from runtime.messaging.mailbox import ring
from runtime.runs.ownership import Principal, check_control
from runtime.runs.status import TERMINAL, derive, find_run
from runtime.store.files import append_jsonl, ensure_dir, lock_current, locked, write_locked
from runtime.store.journals import INBOX, LOG
from runtime.store.layout import RunPaths, StateRoot

if TYPE_CHECKING:
    from collections.abc import Iterable

PIPE_BUF = 4096
"""Writes up to this size to a FIFO are atomic (POSIX minimum; Linux's value)."""


def _check_accepts(run: dict[str, Any], kind: str, force: bool) -> None:
    if kind in CONTROL_TYPES or force:
        return
    accepts = accepted_types(run)
    if kind not in accepts:
        listed = ", ".join(accepts) if accepts else "none besides control.*"
        raise BadInput(
            f"run {run['run']} does not accept {kind!r} (accepts: {listed})",
            hint="send a declared type, or pass --force",
        )


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
) -> dict[str, Any]:
    """Validate, persist and wake; returns what happened (`state` says where it went)."""
    address = parse_address(to)
    if address.kind in ("coordinator", "session"):
        return emit(root, kind, body, principal, to=to, summary=summary)
    if address.kind == "tool":
        make_envelope(
            to=to, type=kind, body=body, sender=principal.id, summary=summary
        )  # validates
        return _invoke_tool(root, address, body, principal)
    assert address.target is not None
    paths, run = find_run(root, address.target)
    envelope = make_envelope(
        to=to, type=kind, body=body, sender=principal.id, summary=summary, reply_to=reply_to
    )
    check_control(run, principal, force=force, action="message")
    if address.kind == "room":
        return _post_room(paths, run, envelope)
    if address.kind == "branch" and kind.startswith("control."):
        raise BadInput(
            f"{kind} goes to the run, not a branch", hint=f"send it to run:{paths.run_id}"
        )
    _check_accepts(run, kind, force)
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
    state = "queued"
    if fifo:
        pause_point("messaging.fifo.before_write")
        if _write_fifo(paths.dir / "control.fifo", envelope):
            box.mark(entry["id"], "sent")
            state = "sent"
        else:  # no reader attached: the message waits in the inbox for `actors recv`
            box.mark(entry["id"], "queued")
            box.wake(envelope)
    return {"to": to, "type": kind, "id": entry["id"], "state": state, "route": "run"}


def _write_fifo(path: Path, envelope: dict[str, Any]) -> bool:
    """Fast path: one atomic write of the envelope line to a reader that is attached now."""
    from runtime.store.files import encode_line

    line = encode_line(envelope)
    if len(line) > PIPE_BUF:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # ENXIO: nobody is reading; ENOENT: no endpoint
    try:
        return os.write(fd, line) == len(line)
    except OSError:
        return False
    finally:
        os.close(fd)


def _apply_terminal_control(
    root: StateRoot, paths: RunPaths, kind: str, body: Any
) -> dict[str, Any]:
    from runtime.runs.retention import archive_run, prune_run

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
    return {"to": f"run:{paths.run_id}", "type": kind, "state": "handled", **outcome}


def _post_room(paths: RunPaths, run: dict[str, Any], envelope: dict[str, Any]) -> dict[str, Any]:
    room = ensure_dir(room_dir(paths))
    from runtime.core.ids import now_iso

    append_jsonl(
        room / "messages.jsonl",
        {**envelope, "received_at": now_iso(), "run_instance_id": run["run_instance_id"]},
        fsync=True,
        compactor=LOG,
    )
    ring(room / "doorbells")
    return {
        "to": envelope["to"],
        "type": envelope["type"],
        "id": envelope["id"],
        "state": "posted",
        "route": "room",
    }


def _invoke_tool(
    root: StateRoot, address: Address, body: Any, principal: Principal
) -> dict[str, Any]:
    """Spawn the tool with the body as its values, checked against its parameters like
    `actors run` does: an unknown or badly typed key is refused before anything runs."""
    from runtime.runs.invoke import invoke_tool

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


def current_branch() -> str | None:
    """`$ACTORS_BRANCH`, validated: it becomes a path component of the branch inbox."""
    from runtime.core import config

    return config.branch()


def _sender_in_run(principal: Principal) -> tuple[str, str]:
    if not principal.via_run_token:
        raise Refused(
            "only a process inside a run can emit actor messages",
            hint="run `actors emit` from a recipe's script (it sets $ACTORS_RUN_ID)",
        )
    run_id = principal.id.removeprefix("run:")
    branch = current_branch()
    return run_id, (f"branch:{run_id}/{branch}" if branch else principal.id)


def emit(
    root: StateRoot,
    kind: str,
    body: Any,
    principal: Principal,
    *,
    to: str = "coordinator",
    summary: str | None = None,
    level: str = "info",
    fsync: bool = True,
    delivery: str = "log",
) -> dict[str, Any]:
    """Append an actor message from the calling run to its outbox (or its room).

    `delivery`: `log` (outbox only, for inspect), `notify` (also to the coordinator
    session, on-idle), `followup` (also to the coordinator session, immediately).
    """
    if delivery not in ("log", "notify", "followup"):
        raise BadInput(f"invalid delivery {delivery!r}", hint="use log, notify or followup")
    run_id, sender = _sender_in_run(principal)
    paths, run = find_run(root, run_id)
    if to == "room":
        to = f"room:{run_id}"
    address = parse_address(to)
    if address.kind == "session" and address.target != run.get("owner_id"):
        raise Refused(f"run {run_id} may only message its own session {run.get('owner_id')}")
    if address.kind not in ("coordinator", "session", "room"):
        raise BadInput(f"emit sends to coordinator, room or session:<id>, not {to}")
    envelope = make_envelope(
        to=to,
        type=kind,
        body=body,
        sender=sender,
        summary=summary,
        level=level,
        extra={"run": run_id, "run_instance_id": run["run_instance_id"]},
    )
    if address.kind == "room":
        if address.target != run_id:
            raise Refused(f"run {run_id} may only post to its own room room:{run_id}")
        return _post_room(paths, run, envelope)
    append_jsonl(paths.outbox, {**envelope, "delivery": delivery}, fsync=fsync, compactor=LOG)
    outcome = {"to": to, "type": kind, "id": envelope["id"], "state": "emitted"}
    if delivery != "log":
        from runtime.delivery.followups import deliver

        mode = "immediate" if delivery == "followup" else "on-idle"
        outcome["delivery"] = deliver(root, run, {**envelope, "delivery": delivery}, mode=mode).get(
            "state"
        )
    return outcome


def recv(
    root: StateRoot,
    principal: Principal,
    *,
    types: tuple[str, ...] | None = None,
    timeout: float | None = None,
) -> dict[str, Any] | None:
    """Claim the next message for the calling run (or branch); None on timeout."""
    run_id, _ = _sender_in_run(principal)
    paths, _ = find_run(root, run_id)
    branch = current_branch()
    box = branch_mailbox(paths, branch) if branch else run_mailbox(paths)
    got = box.wait_claim(
        timeout=timeout,
        types=types,
        exclude_types=() if branch else CONTROL_TYPES,
        consumer=f"recv:{branch or run_id}",
    )
    return got[0] if got else None


def finish(
    root: StateRoot, principal: Principal, entry_id: str, *, ok: bool, error: str | None = None
) -> None:
    run_id, _ = _sender_in_run(principal)
    paths, _ = find_run(root, run_id)
    branch = current_branch()
    box = branch_mailbox(paths, branch) if branch else run_mailbox(paths)
    pause_point("messaging.finish.before_mark")
    # Check and mark in one step under the claim lock: a consumer that stalled past its
    # lease must not acknowledge a message another consumer has claimed in the meantime.
    with locked(box.lock_path):
        entry = box.refresh().get(entry_id)
        holder = (entry or {}).get("claimed_by") or {}
        if entry is None or entry.get("state") != "claimed" or holder.get("pid") != os.getpid():
            raise Conflict(
                f"message {entry_id} is not claimed by this process",
                hint="its lease may have expired and another consumer taken it",
            )
        if ok:
            box.mark(entry_id, "handled")
        else:
            box.mark(entry_id, "failed", error=error)
    pause_point("messaging.finish.after_mark")


BATCH_BYTES = 1 << 20
"""Most bytes `Sender.send_many` writes under one flock (one fsync, one ring)."""


class Sender:
    """A stream of messages to one run: validated once, then cheap appends.

    For callers that send many messages (the throughput path; no wake.jsonl lines, no
    FIFO fast path, no control types): the address, ownership,
    accepted types and the run's liveness are checked when the sender is made and the
    liveness again every `recheck_s`; the inbox descriptor and the consumers' doorbell
    FIFOs stay open; `send` is one whole-line append under the flock (with an fsync
    unless `fsync=False`), then one byte per doorbell; `send_many` does the same once for
    many lines (the way to high throughput: flock, fsync and ring are per write).
    """

    def __init__(
        self,
        root: StateRoot,
        to: str,
        principal: Principal,
        *,
        force: bool = False,
        fsync: bool = True,
        recheck_s: float = 0.5,
    ) -> None:
        address = parse_address(to)
        if address.kind != "run" or address.target is None:
            raise BadInput(f"a sender streams to a run:ID address, not {to}")
        self.root, self.to, self.principal, self.force = root, to, principal, force
        self.fsync, self.recheck_s = fsync, recheck_s
        self.paths, self.run = find_run(root, address.target)
        check_control(self.run, principal, force=force, action="message")
        self._fd = -1
        self._bells: dict[str, int] = {}
        self._checked = 0.0
        self._bells_at = 0.0
        self._accepts = set(accepted_types(self.run)) | set(CONTROL_TYPES)
        self._inbox = self.paths.inbox
        self._instance = json.dumps(self.run["run_instance_id"])
        self._check_alive()

    def _check_alive(self) -> None:
        import time

        status = derive(self.paths, self.run)["status"]
        if status in TERMINAL:
            raise Conflict(
                f"run {self.paths.run_id} is {status}; nothing reads its mailbox any more"
            )
        self._checked = time.monotonic()

    def _doorbells(self) -> list[int]:
        import time

        now = time.monotonic()
        if now - self._bells_at > 0.1:
            self._bells_at = now
            directory = self.paths.dir / "doorbells"
            try:
                # data only: topic bells (the runner's `control` one) are never rung from here
                names = {
                    n for n in os.listdir(directory) if n.endswith(".fifo") and n.count(".") == 1
                }
            except FileNotFoundError:
                names = set()
            if os.path.islink(directory):
                names = set()
            for name in list(self._bells):
                if name not in names:
                    os.close(self._bells.pop(name))
            for name in names - set(self._bells):
                from runtime.messaging.mailbox import open_bell

                try:
                    bell = open_bell(directory / name)
                except OSError:
                    continue
                if bell is not None:
                    self._bells[name] = bell
        return list(self._bells.values())

    def send(self, kind: str, body: Any = None, *, summary: str | None = None) -> str:
        """Append one message; returns its id."""
        return self.send_many(kind, (body,), summary=summary)[0]

    def send_many(
        self, kind: str, bodies: Iterable[Any], *, summary: str | None = None
    ) -> list[str]:
        """Append one `kind` message per body; returns their ids, in order.

        Every envelope is built and checked before anything is written (a bad body writes
        none). Lines then go out in chunks of up to `BATCH_BYTES`, each chunk one write
        under one flock, one fsync (unless `fsync=False`) and one ring: a consumer may see
        a chunk's messages arrive together, never a part of one line. A write that fails
        (a full disk) leaves no part of its chunk, but the chunks before it stay sent.
        """
        import time

        from runtime.core.ids import new_id
        from runtime.messaging.envelope import check_body, encode_envelope

        if kind.startswith("control."):
            raise BadInput(f"send {kind} with `message`, not a stream sender")
        if kind not in self._accepts and not self.force:
            _check_accepts(self.run, kind, self.force)
        if time.monotonic() - self._checked > self.recheck_s:
            self._check_alive()
        # validated once; each message differs only by id and body (a batch shares the
        # timestamp of its write)
        template = make_envelope(
            to=self.to, type=kind, sender=self.principal.id, summary=summary, check_size=False
        )
        head = f'","state":"queued","queued_at":"{template["ts"]}","run_instance_id":{self._instance},"envelope":'
        ids: list[str] = []
        lines: list[bytes] = []
        for body in bodies:
            check_body(body)
            ident = new_id()
            envelope = {**template, "id": ident, "body": body}
            # the entry line of `Mailbox.deliver`, with the envelope encoded once (the size
            # check's text is the stored text); the id is plain ASCII
            lines.append(f'{{"id":"{ident}{head}{encode_envelope(envelope)}}}\n'.encode())
            ids.append(ident)
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            if chunk and size + len(line) > BATCH_BYTES:
                self._append(b"".join(chunk))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        if chunk:
            self._append(b"".join(chunk))
        return ids

    def _append(self, data: bytes) -> None:
        import fcntl

        # the descriptor stays open between messages; lock_current swaps it for the new
        # file when a compaction has replaced the inbox meanwhile
        self._fd = lock_current(self._inbox, self._fd if self._fd >= 0 else None)
        try:
            write_locked(self._fd, self._inbox, data, INBOX)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        if self.fsync:
            os.fsync(self._fd)
        for fd in self._doorbells():
            try:
                os.write(fd, b"\n")
            except OSError:
                pass  # full (a wake is pending) or the reader left (dropped at the next refresh)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for fd in self._bells.values():
            os.close(fd)
        self._bells.clear()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

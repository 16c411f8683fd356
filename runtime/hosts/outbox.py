"""Messages to remote runs: durable here until the host accepted them, then exactly once.

Here, `actors message run:<host>/<id>` appends the message to the host's outbox
(`hosts/<name>/outbox.jsonl`, one whole fsynced line under the journal's flock) with an
idempotency key, before anything goes over the network. Then the outbox is flushed, in
order, under the outbox's lock (one flusher per host): every queued message goes as one
JSON line on the stdin of one channel, `actors host deliver` on the host, which answers
one line per message; each answer is written back here as a state line of the message
(`delivered` or `refused`). A host that cannot be reached leaves the queue as it is: the
sender is told the message is queued, and the host's link (`actors host link`, started
then if it is not running) flushes the outbox each time its channel (re)connects, as does
the next `message` to that host. No timer polls the host: the link's reconnects follow a
dropped channel, as for follow-ups.

On the host, `receive` accepts a key once: under the session's lock, a key already in
its receipts (`sessions/<S>/host-receipts.jsonl`) is answered as before, without a second
delivery, and so is a key already in the run's mailbox (the receipt's write was cut off
after the delivery); a retry after a lost answer therefore delivers nothing twice.

A message the host refuses after its sender was told it was queued (the run ended there,
its mailbox does not take the type) comes back as one `message.refused` follow-up to the
sending session, naming the run and the host's reason.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
from typing import IO, Any, NotRequired, TypedDict, cast

from runtime.core.errors import ActorsError, BadInput
from runtime.core.faults import pause_point
from runtime.core.ids import new_id, now_iso
from runtime.core.terminal import one_line
from runtime.hosts.host import Host
from runtime.hosts.ssh import SSH_FAILED, HostUnreachable, explain, no_ssh
from runtime.store.layout import StateRoot

MAX_ANSWER = 1 << 20
"""The longest answer line the host may send for one message (its outcome is small)."""
FLUSH_TIMEOUT_S = 30.0
"""A flush whose channel does not finish within this (plus a second a message) is cut
and counts as unreachable: what it did not answer stays queued, and is sent again."""
_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,100}")

UNREACHABLE = "queued for {host} (unreachable): delivered when the link returns"


class Queued(TypedDict):
    """One message in a host's outbox (its first line; state lines follow it)."""

    key: str
    """The idempotency key the host accepts once."""
    run: str
    sender: str
    """The session that sent it (told of a refusal it did not see)."""
    type: str
    body: Any
    summary: str | None
    reply_to: str | None
    force: bool
    queued_at: str
    state: str
    """`queued`, then `delivered` or `refused` (with the host's `answer`)."""
    answer: NotRequired[dict[str, Any]]
    told: NotRequired[str]
    """`queued`: its sender was told it is queued (a refusal then comes as a follow-up)."""
    unrecorded: NotRequired[str]
    """Never written: in what `send` returns when the host answered the message but its
    state could not be written here (why): the host's answer stands, and the next flush
    records it (the host answers the key again as before, without a second copy)."""


class UnrecordedAnswer(ActorsError):
    """The host answered, but writing an answer's state here failed (a full disk, a
    read-only file system): the messages it answered stay queued here, and the next flush
    sends them again, which the host answers as before (its receipts), never twice."""

    def __init__(self, message: str, answers: dict[str, dict[str, Any]]) -> None:
        super().__init__(
            message,
            hint="free the disk; the next message or the host's link "
            "records what the host answered",
        )
        self.answers = answers
        """Every answer the host gave on the channel, by key (recorded or not)."""


# -- here -------------------------------------------------------------------------------


def queue(host: Host, message: Queued) -> None:
    """Durable in the outbox before anything is sent. Under the host's placing lock, as
    a placement is (runtime.hosts.records.host_held): a host `host rm` removed meanwhile
    is NotFound (one line, exit 2), and its `hosts/<name>/` is never made again by this
    write (a ghost holding a message no link will ever send)."""
    from runtime.hosts.records import host_held
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import HOST_OUTBOX

    pause_point("hosts.outbox.before_queue")
    with host_held(host.root, host.name) as paths:
        append_jsonl(paths.outbox, message, fsync=True, compactor=HOST_OUTBOX)


_FIELDS: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "run": (str,),
    "sender": (str,),
    "type": (str,),
    "summary": (str, type(None)),
    "reply_to": (str, type(None)),
    "force": (bool,),
    "state": (str,),
}
"""A message's fields and their types (`body` is any JSON): a line folded into anything
else (damaged, cut off, written by hand) is not a message, and is skipped."""


def messages(host: Host) -> list[Queued]:
    """Every message of the outbox, its state folded, in the order they were queued;
    what is not a whole message (a damaged line) is skipped, never a KeyError that
    would stop the sender and the link alike."""
    from runtime.store.reads import fold, read_jsonl

    records = read_jsonl(host.paths.outbox).records
    return [
        cast("Queued", m)
        for m in fold(records, key="key").values()
        if "body" in m
        and isinstance(m.get("answer", {}), dict)
        and all(isinstance(m.get(k), kinds) for k, kinds in _FIELDS.items())
    ]


def pending(host: Host) -> list[Queued]:
    return [m for m in messages(host) if m["state"] == "queued"]


def _mark(host: Host, key: str, **fields: Any) -> None:
    """A message's state line. The outbox is compacted past its cap as a mailbox is
    (runtime.store.journals.HOST_OUTBOX): every message still queued kept whole, the
    newest answered ones after, so a send never reads more than about the cap."""
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import HOST_OUTBOX

    append_jsonl(host.paths.outbox, {"key": key, **fields}, fsync=True, compactor=HOST_OUTBOX)


def new_message(
    run: str,
    sender: str,
    kind: str,
    body: Any,
    *,
    summary: str | None,
    reply_to: str | None,
    force: bool,
) -> Queued:
    """A message checked here as the host will check its form (type, body depth, size),
    so bad input is refused before it is queued."""
    from runtime.messaging.envelope import make_envelope

    make_envelope(to=f"run:{run}", type=kind, body=body, sender=sender, summary=summary)
    return {
        "key": new_id(),
        "run": run,
        "sender": sender,
        "type": kind,
        "body": body,
        "summary": summary,
        "reply_to": reply_to,
        "force": force,
        "queued_at": now_iso(),
        "state": "queued",
    }


def send(host: Host, message: Queued) -> Queued:
    """Queue `message`, flush the outbox, and return the message's state now. When it is
    still queued (the host is unreachable), its sender is recorded as told so (the caller
    starts the host's link, to carry it when the host is back)."""
    from runtime.store.appends import locked

    queue(host, message)
    answers: dict[str, dict[str, Any]] = {}
    try:
        with locked(host.paths.outbox_lock):
            try:
                answers = flush_locked(host, own=message["key"])
            except HostUnreachable:
                pass  # stays queued: the sender is told so, the link carries it
            except UnrecordedAnswer as err:
                # the host has what it answered: never withdrawn (a resend would double)
                return _answered_unrecorded(host, message, err)
            except ActorsError as err:
                _withdraw(host, message["key"], err)
                raise
            answer = answers.get(message["key"])
            if answer is not None:  # as recorded (however far a compaction went since)
                return _answered(message, answer)
            mine = next((m for m in messages(host) if m["key"] == message["key"]), message)
            if mine["state"] == "queued":
                _mark(host, mine["key"], told="queued")
    except (ActorsError, OSError):
        _gone(host)  # `host rm` took the host (and its outbox) meanwhile: said so
        raise
    return mine


def _gone(host: Host) -> None:
    """NotFound (the one line of a host not recorded) when `host rm` removed the host:
    what failed for want of its files is said as that, not as a disk error."""
    from runtime.hosts.records import load_host

    if not host.paths.record.exists():
        load_host(host.root, host.name)


def _answered_unrecorded(host: Host, message: Queued, err: UnrecordedAnswer) -> Queued:
    """The host answered on the channel, but a state line could not be written here. The
    caller's message is what the host said of it (`delivered` or `refused`, marked
    `unrecorded`), so its sender never resends what the host took. One the host did not
    answer before the write failed may have reached it all the same: it stays queued
    (never withdrawn), and the sender is told that in one line."""
    why = one_line(err.message, 300)
    answer = err.answers.get(message["key"])
    if answer is None:
        raise UnrecordedAnswer(
            f"the state of messages to {host.name} could not be written here ({why}); "
            f"this one stays queued and is sent again, once",
            err.answers,
        )
    host.log(f"the host's answer to message {message['key']} is not recorded yet: {why}")
    return {**_answered(message, answer), "unrecorded": why}


def _answered(message: Queued, answer: dict[str, Any]) -> Queued:
    """`message` in the state the host's `answer` gives it."""
    state = "refused" if "error" in answer else "delivered"
    return {**message, "state": state, "answer": answer}


def _withdraw(host: Host, key: str, err: ActorsError) -> None:
    """The caller is told its message failed (`err`) before the host answered anything:
    unless the host already took it, it is refused here, so no later flush delivers what
    its sender was told did not go (a resend would double it). Best effort: the error
    the caller sees is `err`. (A message sent on a channel whose answers could not be
    recorded is never withdrawn: UnrecordedAnswer.)"""
    with contextlib.suppress(ActorsError, OSError):
        mine = next((m for m in messages(host) if m["key"] == key), None)
        if mine is not None and mine["state"] == "queued":
            _mark(host, key, state="refused", answer={"key": key, "error": one_line(str(err), 300)})


def flush(host: Host) -> None:
    """What the link does on each (re)connect: send whatever is queued, in order."""
    from runtime.store.appends import locked

    with locked(host.paths.outbox_lock):
        flush_locked(host, own=None)


def flush_locked(host: Host, *, own: str | None) -> dict[str, dict[str, Any]]:
    """Send every queued message over one channel and record each answer; the answers,
    by key. Under the outbox lock. HostUnreachable when the channel could not be had or
    was cut: what was not answered stays queued. A refusal of a message whose sender was
    told it is queued is told to that sender (`own`, the caller's message, is the
    caller's to report)."""
    queued = pending(host)
    if not queued:
        return {}
    argv = host.command(["host", "deliver", "--session", host.record["session"]])
    wire = b"".join(json.dumps(_wire(m), separators=(",", ":")).encode() + b"\n" for m in queued)
    by_key = {m["key"]: m for m in queued}
    answers: dict[str, dict[str, Any]] = {}
    try:
        channel = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except FileNotFoundError as exc:
        raise no_ssh() from exc
    with channel:
        assert channel.stdin is not None and channel.stdout is not None
        assert channel.stderr is not None
        timer = threading.Timer(FLUSH_TIMEOUT_S + len(queued), channel.kill)
        err = bytearray()
        # written and drained alongside the answers: no pipe can stall the others
        feeder = threading.Thread(target=_feed, args=(channel.stdin, wire), daemon=True)
        drain = threading.Thread(target=_drain, args=(channel.stderr, err), daemon=True)
        for thread in (timer, feeder, drain):
            thread.start()
        try:
            while line := channel.stdout.readline(MAX_ANSWER + 1):
                answer = _answer_of(line)
                message = by_key.pop(str(answer.get("key")), None) if answer else None
                if message is None or answer is None:
                    continue  # not an answer to what was sent: ignored
                answers[message["key"]] = answer
                refused = "error" in answer
                state = "refused" if refused else "delivered"
                try:
                    pause_point("hosts.outbox.before_mark")
                    _mark(host, message["key"], state=state, answer=answer)
                except (ActorsError, OSError) as exc:
                    # the host has it: it stays queued here, and the next flush is
                    # answered as before (the host's receipts), never delivered twice
                    raise UnrecordedAnswer(
                        f"host {host.name} answered message {message['key']}, but its "
                        f"state could not be written here: {one_line(str(exc), 200)}",
                        answers,
                    ) from exc
                if refused and message["key"] != own and message.get("told") == "queued":
                    _tell_refused(host, message, answer)
            channel.wait()
        finally:
            timer.cancel()
            channel.kill()
            feeder.join()
            drain.join()
    if by_key:  # some were not answered: the channel was cut or ssh failed
        r = host.record
        if channel.returncode == SSH_FAILED:
            raise explain(host.name, r["address"], r["port"], err.decode(errors="replace"))
        raise HostUnreachable(
            f"host {host.name}: the message channel ended with {len(by_key)} unanswered "
            f"(exit status {channel.returncode})"
        )
    return answers


def _feed(stdin: IO[bytes], wire: bytes) -> None:
    with contextlib.suppress(OSError):  # the channel went: what was not answered stays
        stdin.write(wire)
    with contextlib.suppress(OSError):
        stdin.close()


def _drain(stderr: IO[bytes], tail: bytearray) -> None:
    """ssh's stderr, its last 64 KiB kept (its last line says why it failed)."""
    while chunk := stderr.read(1 << 16):
        tail.extend(chunk)
        del tail[: -(1 << 16)]


def _wire(message: Queued) -> dict[str, Any]:
    keys = ("key", "run", "type", "body", "summary", "reply_to", "force")
    return {k: message[k] for k in keys}  # type: ignore[literal-required]


def _answer_of(line: bytes) -> dict[str, Any] | None:
    from runtime.core.bounded_json import decode

    if not line.endswith(b"\n"):
        return None  # longer than MAX_ANSWER (or cut): not an answer
    with contextlib.suppress(ValueError, ActorsError):
        found = decode(line, max_bytes=MAX_ANSWER)
        return found if isinstance(found, dict) else None
    return None


def _tell_refused(host: Host, message: Queued, answer: dict[str, Any]) -> None:
    """One follow-up to the sender: its queued message was refused there, and why."""
    from runtime.delivery.engine import submit
    from runtime.messaging.envelope import build_envelope

    address = f"run:{host.name}/{message['run']}"
    why = one_line(str(answer.get("error") or "refused"), 300)
    hint = one_line(str(answer.get("hint") or ""), 200)
    envelope = build_envelope(
        type="message.refused",
        to="coordinator",
        session=message["sender"],
        sender=address,
        summary=f"Message {message['type']} to {address} was refused by host {host.name}: {why}",
        level="warning",
        body={
            "run": address,
            "host": host.name,
            "type": message["type"],
            "key": message["key"],
            "error": why,
            "hint": hint,
        },
        extra={
            "reason": "notification",
            "idempotency_key": f"{host.name}:refused:{message['key']}",
        },
    )
    try:
        submit(
            host.root,
            message["sender"],
            envelope,
            delivery_id=f"{host.name}:refused:{message['key']}",
        )
    except ActorsError as err:
        host.log(f"could not tell {message['sender']} of a refused message: {err}")


def outcome(host: Host, message: Queued) -> dict[str, Any]:
    """What the sender is told of its message: the host's outcome (its address the
    remote one), or that it is queued."""
    address = f"run:{host.name}/{message['run']}"
    if message["state"] == "queued":
        return {
            "to": address,
            "type": message["type"],
            "key": message["key"],
            "state": "queued-for-host",
            "host": host.name,
        }
    answer = dict(message.get("answer") or {})
    found = dict(answer.get("outcome") or {})
    found.update(to=address, host=host.name)
    return found


# -- on the host ------------------------------------------------------------------------


def receive(root: StateRoot, session: str, source: IO[bytes], out: IO[str]) -> None:
    """`actors host deliver --session S`: each line a message for a run of S's, delivered
    once per key (receipts), answered with one line each, in order. The lock is held for
    one message at a time: a channel that hangs between lines holds up no other.

    The receipts are compacted past their cap from this channel's first message on
    (runtime.store.journals.host_receipts): the coordinator sends every message it has
    not recorded an answer to, oldest first, so a receipt before that one is of a message
    it never sends again, and every receipt it may still need is kept."""
    from runtime.store.appends import append_jsonl, locked
    from runtime.store.journals import host_receipts
    from runtime.store.layout import session_paths
    from runtime.store.reads import read_jsonl
    from runtime.store.writes import ensure_dir

    paths = session_paths(root, session)
    ensure_dir(paths.dir)
    receipts = paths.dir / "host-receipts.jsonl"
    seen: dict[str, dict[str, Any]] = {}
    offset, identity = 0, None
    since: str | None = None
    while line := source.readline(MAX_ANSWER + 1):
        if not line.endswith(b"\n"):  # longer than any message: skipped whole
            while line and not line.endswith(b"\n"):
                line = source.readline(MAX_ANSWER + 1)
            continue
        with locked(paths.dir / ".host-receipts.lock"):
            chunk = read_jsonl(receipts, offset=offset, identity=identity)
            offset, identity = chunk.next_offset, chunk.identity
            for record in chunk.records:
                key, said = record.get("key"), record.get("answer")
                if isinstance(key, str) and isinstance(said, dict):
                    seen.setdefault(key, said)
            answer = _receive_one(root, session, line, seen)
            if answer is None:
                continue
            since = since or answer["key"]  # the oldest message the coordinator holds
            if not answer.get("repeat"):
                record = {"key": answer["key"], "answer": answer}
                append_jsonl(receipts, record, fsync=True, compactor=host_receipts(since))
        out.write(json.dumps(answer, separators=(",", ":"), default=str) + "\n")
        out.flush()


def _receive_one(
    root: StateRoot, session: str, line: bytes, seen: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    from runtime.core.bounded_json import decode

    try:
        wire = decode(line, max_bytes=MAX_ANSWER)
    except ValueError:
        return None
    key = wire.get("key") if isinstance(wire, dict) else None
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return None
    assert isinstance(wire, dict)
    if key in seen:
        return {**seen[key], "repeat": True}
    try:
        return {"key": key, "outcome": _deliver(root, session, key, wire)}
    except ActorsError as err:
        return {"key": key, "error": err.message, "hint": err.hint, "code": err.exit_code}


def _deliver(root: StateRoot, session: str, key: str, wire: dict[str, Any]) -> dict[str, Any]:
    from runtime.routing.router import send
    from runtime.runs.ownership import current_principal

    run, kind = wire.get("run"), wire.get("type")
    if not isinstance(run, str) or not isinstance(kind, str):
        raise BadInput("the message names no run or type")
    summary, reply_to = wire.get("summary"), wire.get("reply_to")
    already = _in_mailbox(root, run, key)
    if already is not None:
        return already
    outcome = send(
        root,
        f"run:{run}",
        kind,
        wire.get("body"),
        current_principal(root, session),
        force=wire.get("force") is True,
        summary=summary if isinstance(summary, str) else None,
        reply_to=reply_to if isinstance(reply_to, str) else None,
        idempotency_key=key,
    )
    return dict(outcome)


def _in_mailbox(root: StateRoot, run: str, key: str) -> dict[str, Any] | None:
    """The message of `key` when the run's mailbox holds it already (delivered, its
    receipt cut off before it was written)."""
    from runtime.messaging.boxes import run_mailbox
    from runtime.store.layout import check_id

    paths = root.run(check_id(run))
    if not paths.inbox.exists():
        return None
    box = run_mailbox(paths)
    try:
        for entry in box.entries():
            envelope = entry["envelope"]
            if envelope.get("idempotency_key") == key:
                return {
                    "to": f"run:{run}",
                    "type": envelope.get("type"),
                    "id": entry["id"],
                    "state": "queued",
                    "route": "run",
                }
    finally:
        box.close()
    return None

"""Follow-ups of remote runs, carried home exactly once over one long-lived channel.

On the host, a run placed from here is owned by this root's session there (the host
record's `session`): its follow-ups are appended, durably, to that session's inbox on
the host, as any follow-up is. `serve` (run on the host by `actors host serve`) writes
each unread entry of that inbox to its stdout as one JSON line, sleeping on the inbox's
doorbell in between (no timer), and marks an entry read only when the coordinator's
`{"ack": id}` line comes back on its stdin.

Here, `relay` (the detached `actors host link NAME`, one per host under a flock) holds
that channel open over the host's ssh master, accepts an entry only for a run this root
placed on that host, submits it to the placing session under a delivery id derived from
the host and the remote delivery id (so a repeat after a lost ack is the same follow-up,
kept once), and acks only after that submit returned: durable on both sides, at most one
copy here. A dropped connection kills nothing: the runs go on there, their follow-ups
wait in the host's inbox, and the relay reconnects with a backoff. The relay ends when
no placed run of the host is still out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, NamedTuple, cast

from runtime.core import cgroups, config
from runtime.core.errors import ActorsError
from runtime.core.faults import pause_point
from runtime.hosts.host import Host
from runtime.hosts.records import end_placement, outstanding, placement
from runtime.store.layout import StateRoot

if TYPE_CHECKING:
    from runtime.messaging.envelope import Envelope

TERMINAL_TYPES = frozenset({"run.done", "run.failed", "run.exited"})
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Waits between reconnects after the channel dropped (only then: no timer polls)."""


# -- on the host ------------------------------------------------------------------------


def serve(root: StateRoot, session: str, out: IO[str], in_fd: int = 0) -> None:
    """`actors host serve --session S`: stream S's unread follow-ups, mark acked ones read.

    Ends when stdin closes (the coordinator went away); nothing else stops with it.
    """
    from runtime.delivery.sessions import SessionInbox
    from runtime.messaging.doorbells import doorbell
    from runtime.runner.guardian import Guard
    from runtime.store.layout import session_paths

    paths = session_paths(root, session)
    inbox = SessionInbox(paths)
    sent: set[str] = set()
    pending = b""
    with doorbell(paths.doorbells) as bell, contextlib.closing(Guard(root, session)) as guard:
        guard.scan(fail_fast=True)  # runs of ours whose runner died are folded now
        out.write('{"ready":true}\n')  # the channel is up: the coordinator sends its queue
        while True:
            inbox.read_barrier()
            for entry in inbox.unread():
                if entry["id"] not in sent:
                    out.write(json.dumps({"followup": entry}, separators=(",", ":")) + "\n")
                    sent.add(entry["id"])
            out.flush()
            poller = select.poll()
            for fd in [bell, in_fd, *guard.fds()]:
                poller.register(fd, select.POLLIN)
            for ready, _ in poller.poll():
                if ready == bell:
                    with contextlib.suppress(BlockingIOError):
                        os.read(bell, 65536)
                elif ready == in_fd:
                    chunk = os.read(in_fd, 65536)
                    if not chunk:
                        return  # the channel closed: the runs go on
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    acked = [_ack_of(line) for line in lines]
                    inbox.mark_read([a for a in acked if a])
                else:
                    guard.handle(ready)


def _ack_of(line: bytes) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        ack = json.loads(line).get("ack")
        return ack if isinstance(ack, str) else None
    return None


# -- here -------------------------------------------------------------------------------


class Accepted(NamedTuple):
    ack: str
    """The host's inbox entry id, acked once the follow-up is durable here."""
    ended: tuple[str, str] | None = None
    """(run id, status) when it was the run's terminal follow-up."""


def accept(host: Host, entry: dict[str, Any]) -> Accepted:
    """One entry from the host, submitted to the session that placed its run. A
    follow-up of a run this root did not place on this host, or of one whose end is
    here already, is refused (acked, logged, never delivered): a host acts on nothing but
    the runs it was given, and each run ends once."""
    from runtime.delivery.engine import submit

    envelope = dict(entry.get("envelope") or {})
    sender = str(envelope.get("from") or "")
    run_id = sender[4:] if sender.startswith("run:") else ""
    try:
        placed = placement(host.root, host.name, run_id) if run_id else None
    except ActorsError:
        placed = None
    if placed is None or placed.get("state") == "ended":
        # after the run's end (its terminal follow-up, or a kill or cancel from here)
        # nothing more of it is owed: a host repeating the end under fresh ids is refused
        why = "not a run placed on this host" if placed is None else "its run has ended"
        host.log(f"refused a follow-up from {sender[:80]!r}: {why}")
        return Accepted(str(entry.get("id")))
    address = f"run:{host.name}/{run_id}"
    envelope["from"] = address
    envelope["session"] = placed["session"]
    envelope["host"] = host.name
    if isinstance(envelope.get("summary"), str):
        envelope["summary"] = renamed(envelope["summary"], run_id, address)
    body = envelope.get("body")
    if isinstance(body, dict):
        body = dict(body, host=host.name, run=address)
        if isinstance(body.get("next"), str):
            body["next"] = renamed(body["next"], run_id, address)
        envelope["body"] = body
    key = str(envelope.get("idempotency_key") or entry.get("id"))
    # the host chose the key: only its digest names anything here (a delivery id is a
    # file name under the session, and `../..` in it must not become a path)
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    delivery_id = f"{host.name}:{digest}"
    if placed["session"].startswith("run:"):  # placed by a run's command: to its inbox
        from runtime.delivery.followups import to_parent_run

        handed = to_parent_run(
            host.root, placed["session"][4:], cast("Envelope", envelope), delivery_id
        )
        if handed.get("state") == "failed":
            raise ActorsError(f"could not hand {address}'s follow-up over: {handed.get('reason')}")
    else:
        submit(host.root, placed["session"], cast("Envelope", envelope), delivery_id=delivery_id)
    kind = envelope.get("type")
    ended = (run_id, final_status(kind, body)) if kind in TERMINAL_TYPES else None
    return Accepted(str(entry.get("id")), ended)


def renamed(text: str, run_id: str, address: str) -> str:
    """A follow-up's summary (or its `next`) naming the run by its address here: the
    host's words name it where they start (`Run ID ...`) and in the next step (`actors
    VERB ID`), and only there; the run's own words in between (its quoted result) are
    left as written, however its id reads (`--as test` and a result of `make test`)."""
    ident = rf"(?:run:)?{re.escape(run_id)}"
    text = re.sub(rf"^Run {ident}(?![\w.-])", f"Run {address}", text, count=1)
    return re.sub(
        rf"((?:^|next: )actors [a-z]+ ){ident}(?=$|\s)",
        lambda found: found[1] + address,
        text,
    )


def final_status(kind: str, body: object) -> str:
    """A run's end as the host tells it, as this root keeps it (the placement's status:
    `ls`, the dashboard, a step's exit status): the body's status when it is a run's final
    status, else the one the follow-up's type says. The host wrote it: huge text, control
    characters, a dict or `placed` never become a status here."""
    from runtime.views.status import TERMINAL

    status = body.get("status") if isinstance(body, dict) else None
    return status if isinstance(status, str) and status in TERMINAL else kind.removeprefix("run.")


MAX_LINE = 4 << 20
"""The longest line a host may send (a follow-up is far smaller): a longer one is dropped."""


def _flush_outbox(host: Host) -> None:
    from runtime.hosts.outbox import flush

    try:
        flush(host)
    except ActorsError as err:
        host.log(f"messages not sent yet: {err}")


def _entries(
    host: Host, stream: IO[bytes], on_ready: Callable[[], None] = lambda: None
) -> Iterator[dict[str, Any]]:
    """The host's lines as entries: bounded in size and depth (runtime.core.bounded_json);
    anything else is logged and skipped, never held in memory whole. The host's first
    line, `{"ready": true}`, calls `on_ready`: the channel is up."""
    from runtime.core.bounded_json import decode

    while True:
        line = stream.readline(MAX_LINE + 1)
        if not line:
            return
        if not line.endswith(b"\n"):
            host.log(f"dropped a line longer than {MAX_LINE} bytes from the host")
            while line and not line.endswith(b"\n"):
                line = stream.readline(MAX_LINE + 1)
            continue
        try:
            found = decode(line, max_bytes=MAX_LINE)
            if found == {"ready": True}:
                on_ready()
                continue
            entry = found["followup"]
        except (ValueError, KeyError, TypeError, ActorsError):
            host.log("skipped a line from the host that is not a follow-up")
            continue
        if isinstance(entry, dict) and isinstance(entry.get("envelope"), dict):
            yield entry


def relay_once(host: Host) -> bool:
    """One connection's life: relay until the channel drops (False) or nothing of the
    host is out any more (True). Once the channel is up (the host's first line says so),
    the messages queued here while the host could not be reached are sent, in order
    (runtime.hosts.outbox)."""
    argv = host.command(["host", "serve", "--session", host.record["session"]])
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as channel:
        assert channel.stdin is not None and channel.stdout is not None
        for entry in _entries(host, channel.stdout, on_ready=lambda: _flush_outbox(host)):
            accepted = accept(host, entry)
            pause_point("hosts.relay.before_ack")
            try:
                channel.stdin.write(json.dumps({"ack": accepted.ack}).encode() + b"\n")
                channel.stdin.flush()
            except BrokenPipeError:
                break  # not acked: the host sends it again, and here it is the same delivery
            if accepted.ended is not None:  # only once acked: till then the link stays
                end_placement(host.root, host.name, *accepted.ended)
            if not outstanding(host.root, host.name):
                channel.stdin.close()
                channel.wait()
                return True
    host.log(f"channel closed (ssh exit status {channel.returncode})")
    return not outstanding(host.root, host.name)


def relay(root: StateRoot, name: str) -> None:
    """`actors host link NAME`: the host's one relay, while any run placed there is out.

    The flock makes it one per host. After letting the lock go it looks once more: a
    spawn that placed a run in between started a link that found the lock held."""
    from runtime.store.appends import try_locked

    while True:
        host = Host.load(root, name)
        with try_locked(host.paths.link_lock) as held:
            if not held:
                return  # another link serves the host
            attempt = 0
            while outstanding(root, name):
                started = time.monotonic()
                try:
                    if relay_once(host):
                        break
                except ActorsError as err:
                    host.log(str(err))
                if time.monotonic() - started > 60:
                    attempt = 0  # it was up for a while: start the backoff over
                time.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
                attempt += 1
        if not outstanding(root, name):
            return


def ensure_links(root: StateRoot, session: str | None = None) -> None:
    """A link for every host with runs still out (of `session`, when given): what a
    session's wait and `reconcile` do, so a link that died is back before anyone waits
    on what it carries."""
    from runtime.hosts.records import list_hosts

    for record in list_hosts(root):
        out = outstanding(root, record["name"])
        if any(session is None or p["session"] == session for p in out):
            start_link(root, record["name"])


def start_link(root: StateRoot, name: str) -> None:
    """Start the host's link, detached, unless one runs (it exits at once then)."""
    Host.load(root, name)  # its files are there while it is recorded: none made here
    link = subprocess.Popen(
        [sys.executable, "-m", "actors", "host", "link", name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, config.HOME.name: str(root.path)},
    )
    # started by a run's command (a swarm's worker on the host): the link serves every
    # run placed there, and must not die with that run's cgroup
    cgroups.release(link.pid)

"""A streaming sender: many messages to one run at a fraction of `send`'s cost per message.

Its own module because it trades `send`'s per-message checks for per-stream ones and
keeps descriptors open between messages: the throughput path (`actors.sender`).
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

from runtime.core.errors import BadInput, Conflict
from runtime.core.ids import new_id
from runtime.messaging.addresses import parse_address
from runtime.messaging.boxes import CONTROL_TYPES, accepted_types
from runtime.messaging.doorbells import open_bell
from runtime.messaging.envelope import check_body, encode_envelope, make_envelope
from runtime.routing.router import check_accepts
from runtime.runs.ownership import Principal, check_control
from runtime.store.appends import lock_current, unlock, write_locked
from runtime.store.journals import INBOX
from runtime.store.layout import StateRoot
from runtime.views.status import TERMINAL, derive, find_run

if TYPE_CHECKING:
    from collections.abc import Iterable

    from runtime.messaging.envelope import Envelope


BATCH_BYTES = 1 << 20
"""Most bytes `Sender.send_many` writes under one flock (one fsync, one ring)."""
BELLS_FRESH_NS = 50_000_000
"""A doorbell listing made less than this long after `doorbells/` last changed is read
again at the next send (many times the kernel's coarse timestamp tick)."""


class Sender:
    """A stream of messages to one run: validated once, then cheap appends.

    For callers that send many messages (the throughput path; no wake.jsonl lines, no
    FIFO fast path, no control types): the address, ownership,
    accepted types and the run's liveness are checked when the sender is made and the
    liveness again every `recheck_s`; the inbox descriptor and the consumers' doorbell
    FIFOs stay open; `send` is one byte per doorbell and one whole-line append under
    the flock (with an fsync unless `fsync=False`); `send_many` does the same once for
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
        check_control(self.run, principal, force=force, action="message", root=root)
        self._fd = -1
        self._bells: dict[str, int] = {}
        self._checked = 0.0
        self._bells_at = 0
        self._bells_mtime: int | None = -1
        self._accepts = set(accepted_types(self.run)) | set(CONTROL_TYPES)
        self._inbox = self.paths.inbox
        self._instance = json.dumps(self.run["run_instance_id"])
        self._check_alive()

    def _check_alive(self) -> None:
        status = derive(self.paths, self.run)["status"]
        if status in TERMINAL:
            raise Conflict(
                f"run {self.paths.run_id} is {status}; nothing reads its mailbox any more"
            )
        self._checked = time.monotonic()

    def _doorbells(self) -> list[int]:
        """The data doorbells, open for writing; called under the inbox's flock.

        The list is read again whenever `doorbells/` may have changed since it was last
        read: its mtime differs, or it was read within `BELLS_FRESH_S` of that mtime (a
        directory's mtime has the kernel clock's coarse resolution, so a FIFO made in
        the same tick as the last listing would leave it unchanged). A stale list would
        miss a consumer that armed its doorbell before this send's lock and then read
        before it: that consumer would sleep through the message."""
        directory = self.paths.doorbells
        try:
            mtime = os.stat(directory, follow_symlinks=False).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime != self._bells_mtime or self._bells_at - (mtime or 0) < BELLS_FRESH_NS:
            self._bells_at, self._bells_mtime = time.time_ns(), mtime
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
        if kind.startswith("control."):
            raise BadInput(f"send {kind} with `message`, not a stream sender")
        if kind not in self._accepts and not self.force:
            check_accepts(self.run, kind, self.force)
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
            envelope: Envelope = {**template, "id": ident, "body": body}
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
        """Ring, write, fsync, unlock: the critical section of every inbox
        (runtime.messaging.durable_inbox, `DurableInbox.append_ringing`), with the
        descriptors kept open between messages (the ring first, so no kill point leaves
        a written line without its wake)."""
        # lock_current swaps the kept descriptor for the new file when a compaction has
        # replaced the inbox meanwhile
        self._fd = lock_current(self._inbox, self._fd if self._fd >= 0 else None)
        try:
            for fd in self._doorbells():
                try:
                    os.write(fd, b"\n")
                except OSError:
                    pass  # full (a wake is pending) or the reader left (dropped at the next listing)
            write_locked(self._fd, self._inbox, data, INBOX)
            if self.fsync:
                os.fsync(self._fd)
        finally:
            unlock(self._fd)

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

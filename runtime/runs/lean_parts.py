"""The lean runner's parts (runtime.runs.lean): a command's pipe on its way to disk,
finding the command's executable, and control messages from the run's inbox.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from runtime.runs.output import CHUNK, LineSplitter, StreamMasker

if TYPE_CHECKING:
    from runtime.messaging.entries import MailboxEntry
    from runtime.messaging.mailbox import Mailbox
    from runtime.runs.context import RunContext
    from runtime.runs.output import Capture, LogFile
    from runtime.store.layout import RunPaths


class Stream:
    """One of the command's two pipes, on its way to its capture and the run's log."""

    def __init__(
        self, fd: int, capture: Capture, log: LogFile, masker: StreamMasker, pending: bytes = b""
    ) -> None:
        self.fd, self.capture, self.masker = fd, capture, masker
        self.lines = LineSplitter(log, pending)

    def take(self, data: bytes) -> None:
        self.capture.write(data)
        self.lines.feed(data)

    def read(self) -> bool:
        """Copy what is there; False at the end of the stream (then closed)."""
        try:
            chunk = os.read(self.fd, CHUNK)
        except BlockingIOError:
            return True
        if chunk:
            self.take(self.masker.feed(chunk))
            return True
        self.close()
        return False

    def close(self) -> None:
        """As runtime.runs.output.pump ends: what the masker held, the partial line."""
        if self.fd < 0:
            return
        self.take(self.masker.flush())
        self.lines.flush()
        os.close(self.fd)
        self.fd = -1


def claim_controls(box: Mailbox) -> list[MailboxEntry]:
    """The control.* messages waiting in the run's inbox, claimed for the runner; a full
    disk is waited out (the claim is journaled), never the end of the run."""
    from runtime.messaging.boxes import CONTROL_TYPES
    from runtime.store.writes import patiently

    return patiently(
        lambda: box.claim(types=CONTROL_TYPES, limit=16, consumer="runner"),
        "claim control messages",
    )


def apply_control(ctx: RunContext, box: Mailbox, entry: MailboxEntry) -> None:
    """`control.stop` (graceful) and `control.kill` (no grace) stop the run; any other
    control type applies to finished runs only. Both runners apply controls here (it is
    trio-free, so the lean runner can import it). Its mark waits out a full disk."""
    from runtime.store.writes import patiently

    kind = entry["envelope"]["type"]
    if kind == "control.stop":
        patiently(lambda: box.mark(entry["id"], "handled"), "mark control.stop handled")
        ctx.stop("stopped")
    elif kind == "control.kill":
        patiently(lambda: box.mark(entry["id"], "handled"), "mark control.kill handled")
        ctx.grace = 0.0
        ctx.stop("killed")
    else:
        why = f"{kind} applies to finished runs only"
        patiently(lambda: box.mark(entry["id"], "failed", error=why), f"mark {kind} failed")


def control_box(paths: RunPaths) -> Mailbox | None:
    """The run's control mailbox, or None while no inbox exists (the common case: reading
    it would cost the mailbox's imports at every start). Only absence says "nothing":
    a sender creates the journal before it rings and writes after, under the lock the
    claim waits for, so an empty journal may be a message on its way
    (runtime.messaging.mailbox, `append_ringing`)."""
    if not os.path.lexists(paths.inbox):
        return None
    from runtime.messaging.boxes import control_mailbox

    return control_mailbox(paths)


def executable(name: str, env: dict[str, str]) -> str:
    """`name` found on the command's own PATH, as subprocess finds it (posix_spawnp
    would search the runner's)."""
    if "/" in name:
        return name
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


def drain(fd: int) -> None:
    try:
        os.read(fd, 65536)
    except BlockingIOError:
        pass

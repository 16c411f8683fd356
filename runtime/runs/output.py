"""A leaf's output on its way to disk: masked, split into lines, bounded.

Each of a command's two streams is read in chunks and passes, in this order, through:

- a `StreamMasker`: every secret of the run is replaced by `***`, also one that spans two
  chunks (the last `longest secret - 1` bytes are held back until the next chunk);
- the command's capture file (`captures/command-NNN/`): whole while a later step reads
  it as its stdin, else only its first `ACTORS_LOG_CAP_BYTES` bytes, then a marker;
- the run's log (`stdout.log` / `stderr.log`), whole lines at a time so two commands
  never interleave inside a line; a partial line longer than `PARTIAL_LINE_CAP` is written
  out with a continuation marker instead of being held. The log rotates at the cap to
  one previous file (`stdout.log.1`).

Every step looks at each byte a bounded number of times and holds a bounded number of
them, so any output shape (no newlines, `\\r` only, NULs, one huge line) costs linear time
and constant memory. Its own module so the leaf stays about processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.compiler.redact import MASK
from runtime.core import config
from runtime.core.errors import StateDamaged
from runtime.store import safe
from runtime.store.layout import rotated

if TYPE_CHECKING:  # the lean runner (runtime.runs.lean) uses this module without trio
    import trio

CHUNK = 65536
PARTIAL_LINE_CAP = 65536
"""A partial line held longer than this is written to the log with `CONTINUED`."""
CONTINUED = b" [actors: line continues]\n"
LOG_CAP_BYTES = config.byte_count(config.LOG_CAP_BYTES)
_FLAGS = os.O_WRONLY | os.O_CREAT  # opened by runtime.store.safe.open_regular: never a link
"""How logs and captures are opened (as before this module; the symlink hardening of
issue 17 #3 owns these flags)."""


class StreamMasker:
    """Masks secrets in a byte stream cut into arbitrary chunks."""

    def __init__(self, secrets: list[str], held: bytes = b"") -> None:
        self._secrets = [s.encode() for s in secrets if s]  # longest first (secret_texts)
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._held = held
        """Bytes not yet passed on (a secret may start in them); kept across a park."""

    @property
    def held(self) -> bytes:
        return self._held

    def feed(self, chunk: bytes | bytearray) -> bytes:
        if not self._secrets:
            return bytes(chunk)
        data = self._mask(self._held + chunk)
        # an occurrence not yet whole starts within the last `keep` bytes: hold them
        split = max(0, len(data) - self._keep)
        self._held = data[split:]
        return data[:split]

    def flush(self) -> bytes:
        data, self._held = self._mask(self._held), b""
        return data

    def _mask(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, MASK.encode())
        return data


class LogFile:
    """A run log shared by every command of the run, rotated at the cap to `<name>.1`."""

    def __init__(self, path: Path, cap: int = LOG_CAP_BYTES) -> None:
        self.path, self.cap = path, cap
        self._fd = safe.open_regular(path, _FLAGS | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> None:
        """Append whole (a file exceeds the cap by at most one write, ~128 KiB)."""
        if not data:
            return
        if self._size and self._size + len(data) > self.cap:
            self._rotate()
        _write_all(self._fd, data)
        self._size += len(data)

    @classmethod
    def adopt(cls, path: Path, cap: int, fd: int, size: int) -> LogFile:
        """The log as an earlier image of this process left it open (runtime.runs.lean
        parks the runner with exec, which keeps its descriptors)."""
        log = cls.__new__(cls)
        log.path, log.cap, log._fd, log._size = path, cap, fd, size
        return log

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    def _rotate(self) -> None:
        safe.rename(self.path, rotated(self.path))  # readers: runtime.store.reads
        os.close(self._fd)
        self._fd = safe.open_regular(self.path, _FLAGS | os.O_APPEND | os.O_TRUNC)
        self._size = 0

    def close(self) -> None:
        os.close(self._fd)


class Capture:
    """One stream's capture file: whole, or its first `cap` bytes and then a marker."""

    def __init__(self, path: Path, cap: int | None) -> None:
        self.path, self.cap = path, cap
        self.fd = safe.open_regular(path, _FLAGS | os.O_TRUNC)
        self.total = 0
        """Bytes the command produced (after masking), kept or not."""

    @classmethod
    def adopt(cls, path: Path, cap: int | None, fd: int, total: int) -> Capture:
        """The capture as an earlier image of this process left it open (see LogFile)."""
        capture = cls.__new__(cls)
        capture.path, capture.cap, capture.fd, capture.total = path, cap, fd, total
        return capture

    def write(self, data: bytes) -> None:
        room = len(data) if self.cap is None else max(0, self.cap - self.total)
        if room:
            _write_all(self.fd, data[:room])
        self.total += len(data)

    def close(self) -> None:
        if self.cap is not None and self.total > self.cap:
            _write_all(self.fd, cut_marker(self.total - self.cap))
        os.close(self.fd)


def cut_marker(dropped: int) -> bytes:
    return (
        f"\n[actors: output cut here: {dropped} more bytes not kept in this file "
        f"(ACTORS_LOG_CAP_BYTES); the latest lines are in the run's log]\n"
    ).encode()


class LineSplitter:
    """Hands the log whole lines; holds at most `PARTIAL_LINE_CAP` bytes of a partial one."""

    def __init__(self, log: LogFile, pending: bytes = b"") -> None:
        self._log = log
        self._pending = pending

    @property
    def pending(self) -> bytes:
        """The partial line held back (kept across a park, see LogFile.adopt)."""
        return self._pending

    def feed(self, data: bytes) -> None:
        cut = data.rfind(b"\n")  # only the new bytes are searched
        if cut >= 0:
            self._log.write(self._pending + data[: cut + 1])
            self._pending = data[cut + 1 :]
        else:
            self._pending += data  # bounded: flushed below once past the cap
        if len(self._pending) > PARTIAL_LINE_CAP:
            self._log.write(self._pending + CONTINUED)
            self._pending = b""

    def flush(self) -> None:
        if self._pending:
            self._log.write(self._pending + b"\n")
            self._pending = b""


async def pump(
    stream: trio.abc.ReceiveStream, capture: Capture, log: LogFile, secrets: list[str]
) -> None:
    """Copy a leaf's stream to its capture file and, whole lines at a time, to the log."""
    masker, lines = StreamMasker(secrets), LineSplitter(log)

    def take(data: bytes) -> None:
        capture.write(data)
        lines.feed(data)

    try:
        while chunk := await stream.receive_some(CHUNK):
            take(masker.feed(chunk))
    finally:
        take(masker.flush())
        lines.flush()


def concatenate(target: Path, sources: list[Path], cap: int | None) -> None:
    """`target` = the sources one after another, streamed (never whole in memory)."""
    out = Capture(target, cap)
    try:
        for source in sources:
            with os.fdopen(safe.open_regular(source, os.O_RDONLY), "rb") as src:
                while block := src.read(1024 * 1024):
                    out.write(block)
    finally:
        out.close()


def trim(path: Path | None, cap: int = LOG_CAP_BYTES) -> None:
    """Cut a capture no later step reads any more to its first `cap` bytes plus a marker."""
    if path is None:
        return
    try:
        size = os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return
    if size <= cap + 4096:  # within the cap (a kept capture's own marker included)
        return
    try:
        fd = safe.open_regular(path, os.O_WRONLY)
    except (OSError, StateDamaged):
        return  # not ours to cut (a planted link, a hard link, a FIFO): the run goes on
    try:
        os.ftruncate(fd, cap)
        os.lseek(fd, cap, os.SEEK_SET)
        _write_all(fd, cut_marker(size - cap))
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

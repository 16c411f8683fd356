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

A disk that takes no more (full, or no descriptor left) never ends the run: what it did
not take is held in memory (`Held`, bounded) and written once it takes writes again.

Every step looks at each byte a bounded number of times and holds a bounded number of
them, so any output shape (no newlines, `\\r` only, NULs, one huge line) costs linear time
and constant memory. Its own module so the leaf stays about processes.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
from pathlib import Path

from runtime.compiler.redact import MASK
from runtime.core import config
from runtime.core.errors import TRANSIENT, StateDamaged
from runtime.store import safe
from runtime.store.layout import rotated
from runtime.store.reads import read_bytes
from runtime.store.writes import patiently

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


class Held:
    """A file's output that its disk did not take yet (full, or out of descriptors).

    Output is written as it comes; when a write fails for a lack that may pass
    (runtime.core.errors.TRANSIENT), the rest is kept here, up to HOLD_CAP bytes (beyond
    that only counted), and written before anything newer once the file takes writes
    again: at the next write, or at the end of the command (`settle`, which waits for
    the disk as the run's end does). Held bytes that never fitted in memory are replaced
    by one line saying how many were lost. Nothing here raises for a full disk: the run
    goes on, and its outcome is not lost for want of log space."""

    __slots__ = ("fd", "lost", "path", "pending")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path
        self.pending = bytearray()
        self.lost = 0

    @property
    def holding(self) -> bool:
        return bool(self.pending or self.lost)

    def put(self, data: bytes | memoryview) -> None:
        if self.holding and not self.retry():
            self._keep(data)  # older bytes first: wait behind them
            return
        rest = self._write(data)
        if rest:
            self._keep(rest)

    def _write(self, data: bytes | memoryview) -> bytes:
        """Write what the disk takes; what it did not (b"" when all of it went)."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except OSError as exc:
                if exc.errno not in TRANSIENT:
                    raise
                return bytes(view)
        return b""

    def _keep(self, data: bytes | memoryview) -> None:
        room = max(0, HOLD_CAP - len(self.pending))
        self.pending += data[:room]
        self.lost += max(0, len(data) - room)

    def retry(self) -> bool:
        """Write what is held; True when nothing is held any more."""
        if self.pending:
            rest = self._write(bytes(self.pending))
            self.pending = bytearray(rest)
            if rest:
                return False
        if self.lost:
            marker = (
                f"\n[actors: {self.lost} bytes of output lost here: the disk was full]\n"
            ).encode()
            self.lost = 0
            rest = self._write(marker)
            if rest:
                self.pending += rest
                return False
        return True

    def settle(self) -> None:
        """Wait until everything held is written (runtime.store.writes.patiently)."""
        if not self.holding:
            return

        def written() -> None:
            if not self.retry():
                raise OSError(errno.ENOSPC, f"{self.path}: output still held")

        patiently(written, f"write the held output of {self.path.name}")


HOLD_CAP = 1024 * 1024
"""Bytes of output one file keeps in memory while its disk takes none."""


class LogFile:
    """A run log shared by every command of the run, rotated at the cap to `<name>.1`."""

    def __init__(self, path: Path, cap: int = LOG_CAP_BYTES) -> None:
        self.path, self.cap = path, cap
        self._fd = safe.open_regular(path, _FLAGS | os.O_APPEND)
        self._size = os.fstat(self._fd).st_size
        self.held = Held(self._fd, path)

    def write(self, data: bytes) -> None:
        """Append whole (a file exceeds the cap by at most one write, ~128 KiB)."""
        if not data:
            return
        if self._size and self._size + len(data) > self.cap:
            self._rotate()
        self.held.put(data)
        self._size += len(data)

    @classmethod
    def adopt(cls, path: Path, cap: int, fd: int, size: int) -> LogFile:
        """The log as an earlier image of this process left it open (runtime.runner.park
        parks the runner with exec, which keeps its descriptors)."""
        log = cls.__new__(cls)
        log.path, log.cap, log._fd, log._size = path, cap, fd, size
        log.held = Held(fd, path)
        return log

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    def _rotate(self) -> None:
        if self.held.holding and not self.held.retry():
            return  # held lines belong to this file: rotate once they are in it
        try:
            safe.rename(self.path, rotated(self.path))  # readers: runtime.store.reads
            fd = safe.open_regular(self.path, _FLAGS | os.O_APPEND | os.O_TRUNC)
        except OSError as exc:
            if exc.errno not in TRANSIENT:
                raise
            return  # no room to start a new file: this one grows until there is
        os.close(self._fd)
        self._fd = fd
        self.held.fd = fd
        self._size = 0

    def close(self) -> None:
        self.held.settle()
        os.close(self._fd)


class Capture:
    """One stream's capture file: whole, or its first `cap` bytes and then a marker."""

    def __init__(self, path: Path, cap: int | None) -> None:
        self.path, self.cap = path, cap
        self.fd = safe.open_regular(path, _FLAGS | os.O_TRUNC)
        self.total = 0
        """Bytes the command produced (after masking), kept or not."""
        self.held = Held(self.fd, path)

    @classmethod
    def adopt(cls, path: Path, cap: int | None, fd: int, total: int) -> Capture:
        """The capture as an earlier image of this process left it open (see LogFile)."""
        capture = cls.__new__(cls)
        capture.path, capture.cap, capture.fd, capture.total = path, cap, fd, total
        capture.held = Held(fd, path)
        return capture

    def write(self, data: bytes) -> None:
        room = len(data) if self.cap is None else max(0, self.cap - self.total)
        if room:
            self.held.put(data[:room])
        self.total += len(data)

    def close(self) -> None:
        if self.cap is not None and self.total > self.cap:
            self.held.put(cut_marker(self.total - self.cap))
        self.held.settle()
        os.close(self.fd)


OUTPUT_PREVIEW_CHARS = 4000


def output_preview(path: Path | None) -> str | None:
    """result.json's `output`: the head of the output file (the runner's, and a fold's)."""
    if path is None or not path.exists():
        return None
    data = read_bytes(path, limit=OUTPUT_PREVIEW_CHARS * 4)
    return data.decode(errors="replace")[:OUTPUT_PREVIEW_CHARS]


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
    def log(self) -> LogFile:
        return self._log

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


def _chars(*spans: str) -> str:
    return "".join("".join(map(chr, range(ord(span[0]), ord(span[-1]) + 1))) for span in spans)


_LEAD = _chars(
    "\x00\x20", "\x7f\xa0", "\xad", "\u061c", "\u115f\u1160", "\u1680", "\u180e",
    "\u2000\u200f", "\u2028\u202f", "\u205f\u206f", "\u3000", "\u3164", "\ufe00\ufe0f",
    "\ufeff", "\uffa0", "\ufff9\ufffb", ">",
)  # fmt: skip
"""What may stand before `---` at the start of a line and still look like its start:
whitespace (all of str.isspace), `>` (earlier quoting), controls and invisible characters."""
_LEAD_SET = frozenset(_LEAD)


class HeaderQuote:
    r"""Quotes every line of a branch's output that could pass for a join header.

    The executor joins parallel branch outputs under `--- branch: <label> status: <s> ---`
    (and first `--- parallel_status: ... ---`), and a merger (a script or a model) reads
    those lines as the structure of what it got. Branch output is run-written, so any
    line of it whose first visible characters are `---` gets one more `>` in front of
    the dashes (`--- branch: x` -> `>--- branch: x`, `>---` -> `>>---`, as mboxrd quotes
    `From `): only the executor's own header lines start with `---`. "A line" is what
    any reader may take for one: after `\n`, `\r`, `\v`, `\f`, `\x1c`-`\x1e`, NEL or
    U+2028/2029 (str.splitlines), and after leading whitespace, controls or invisible
    characters. A nested group's headers are quoted once more by each enclosing join.

    Streaming and linear: bytes in arbitrary blocks (undecodable bytes pass through
    unchanged), holding back at most two dashes (a `---` cut by a block end) and an
    unfinished UTF-8 sequence; each `---` looks back over the blanks before it only."""

    _BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._lead = "\n"
        """Stands for what came before: a line start (a newline) or anything else (`x`)."""
        self._held = ""

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        text = self._lead + self._held + self._decoder.decode(data, final)
        dashes = len(text) - len(text.rstrip("-"))
        keep = dashes if dashes < 3 and not final else 0  # maybe the start of a `---`
        self._held = text[len(text) - keep :]
        text = text[: len(text) - keep]
        parts: list[str] = []
        done = 1  # the lead character is not output
        found = text.find("---", 1)
        while found != -1:
            start = found
            while text[start - 1] in _LEAD_SET:  # text[0] is a break or not a blank: stops
                start -= 1
                if start == 0:
                    break
            if self._BREAK.search(text, start, found):
                parts += [text[done:found], ">"]
                done = found
            found = text.find("---", found + 3)
        parts.append(text[done:])
        blanks = text[len(text.rstrip(_LEAD)) :]
        self._lead = "\n" if self._BREAK.search(blanks) else "x"
        return "".join(parts).encode("utf-8", "surrogateescape")


def quoted_copy(out: Capture, source: Path) -> None:
    """Append a branch's output to a join, its header look-alikes quoted (HeaderQuote),
    ending it with a newline when it has none (streamed, never whole in memory)."""
    quote = HeaderQuote()
    last = b"\n"
    with open(source, "rb") as src:
        while block := src.read(1024 * 1024):
            data = quote.feed(block)
            if data:
                out.write(data)
                last = data[-1:]
    data = quote.feed(b"", final=True)
    if data:
        out.write(data)
        last = data[-1:]
    if last != b"\n":
        out.write(b"\n")


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
        Held(fd, path).put(cut_marker(size - cap))  # a full disk keeps only the cut
    finally:
        os.close(fd)

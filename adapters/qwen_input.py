"""`qwen_code`: an interactive Qwen Code woken through its remote-input file.

Started as `qwen --input-file FILE [--json-file EVENTS]`, Qwen Code's TUI polls FILE
(every 500 ms) for JSONL commands and submits each `{"type": "submit", "text": ...}` as a
user prompt, after the running turn if one runs. The adapter appends one such line per
follow-up: the fenced follow-up itself (D5), into the user's own session (D1), waking it
idle. With `--json-file` Qwen also writes its events there (the stream-json records:
`user`, `assistant`, ...), which the adapter reads back to confirm `injected` (the `user`
record carrying the delivery id) and `processed` (an `assistant` record after it).

Idempotency: before appending, the input file is searched for the delivery id (our
header line carries it), so a retried delivery never submits twice. The input file is
opened without following a symlink and must be the user's own (another user's file
would hand them the follow-up): else the delivery fails finally, nothing written. Qwen
reads the file from the offset it has consumed, so appending is all it takes.

Options: `input_file` (the path given to `--input-file`), `events_file` (the path given
to `--json-file`; without it the receipt is `delivered` with `triggered` only),
`confirm_timeout` (s, default 5: Qwen polls every 500 ms, and a busy turn finishes
first), `processed_timeout` (s, default 3; 0 = do not wait).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import stat
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from runtime.core import platform
from runtime.core.errors import ResourceError
from runtime.core.inotify import Inotify
from runtime.delivery.contract import (
    Capabilities,
    CheckedAdapter,
    DeliveryContext,
    Option,
    Receipt,
    elapsed_ms,
    option_seconds,
    processed_timeout,
)
from runtime.delivery.render import injected_text

_POLL_S = 0.05
"""How often the events file is looked at where no inotify tells of its changes."""
_SCAN_BYTES = 4 * 1024 * 1024
"""How much of the end of the input / events file is searched for a delivery id."""


class QwenInputAdapter(CheckedAdapter):
    HARNESS = "qwen_code"
    capabilities = Capabilities(
        wake_mode="JSONL submit command appended to Qwen Code's --input-file",
        level="D7",
        modes=("immediate", "on-idle"),
        notes="full message into the user's own interactive Qwen Code; injected and"
        " processed confirmed from its --json-file events",
        native=True,
        injects=True,
        completion=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("input_file", "the file Qwen Code was started with: qwen --input-file FILE"),
        Option("events_file", "the file given to qwen --json-file (confirms the turn)"),
        Option("confirm_timeout", "seconds to see the prompt taken (default 5)", "seconds"),
        Option("processed_timeout", "seconds to watch the turn finish (default 3)", "seconds"),
    )

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        cls.absolute(options, "input_file")
        cls.absolute(options, "events_file")
        cls.needs(
            options, "input_file", "/abs/path (start Qwen Code with `qwen --input-file /abs/path`)"
        )

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        started = time.monotonic()
        path = Path(self.options["input_file"])
        marker = context.delivery_id
        events = self.options.get("events_file")
        try:
            already = _tail_has(path, json.dumps(marker)[1:-1])
            if not already:
                text = injected_text(envelope, context)
                line = json.dumps({"type": "submit", "text": text}) + "\n"
                _append_own(path, line.encode())
        except OSError as exc:
            return Receipt(
                "failed",
                context.delivery_id,
                retryable=False,
                reason=f"qwen_code input file {path}: {exc.strerror or exc}",
            )
        observed = ["triggered"]
        metadata: dict[str, Any] = {"already_written": already, "input_file": str(path)}
        if not events:
            return Receipt("delivered", context.delivery_id, observed=observed, metadata=metadata)
        seen = _wait_for(
            Path(events),
            lambda records: _user_at(records, marker) is not None,
            option_seconds(self.options, "confirm_timeout", 5.0),
        )
        if seen is None:
            return Receipt(
                "accepted",
                context.delivery_id,
                observed=observed,
                reason="written, but Qwen Code's events file does not show the prompt taken",
                metadata=metadata,
            )
        observed.append("injected")
        metadata["injected_ms"] = elapsed_ms(started)
        wait = processed_timeout(self.options)
        if wait > 0 and _wait_for(Path(events), lambda r: _answered(r, marker), wait):
            observed.append("processed")
            metadata["processed_ms"] = elapsed_ms(started)
        return Receipt("delivered", context.delivery_id, observed=observed, metadata=metadata)


def _append_own(path: Path, data: bytes) -> None:
    """One write, appended, to a file of this user's (created 0600 if missing), never
    through a symlink; another user's file raises PermissionError, nothing written."""
    fd = _open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise PermissionError(1, "owned by another user; nothing was written")
        os.write(fd, data)
    finally:
        os.close(fd)


def _open_regular(path: Path, flags: int) -> int:
    """Open a regular file, never through a symlink and never waiting: a FIFO, device or
    directory planted at the path (another user can plant one in /tmp) raises OSError
    at once instead of blocking the delivery for ever."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise OSError(errno.EINVAL, "a FIFO, not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or directory)")
    os.set_blocking(fd, True)
    return fd


def _tail(path: Path) -> bytes:
    try:
        fd = _open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - _SCAN_BYTES), os.SEEK_SET)
        return os.read(fd, _SCAN_BYTES)
    finally:
        os.close(fd)


def _tail_has(path: Path, needle: str) -> bool:
    return needle.encode() in _tail(path)


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        tail = _tail(path)
    except OSError:  # not readable, or not a regular file: nothing confirmed from it
        return []
    out = []
    for raw in tail.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a line cut by the scan window, or one being written
        if isinstance(record, dict):
            out.append(record)
    return out


def _text(record: dict[str, Any]) -> str:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _user_at(records: list[dict[str, Any]], marker: str) -> int | None:
    for index, record in enumerate(records):
        if record.get("type") == "user" and marker in _text(record):
            return index
    return None


def _answered(records: list[dict[str, Any]], marker: str) -> bool:
    at = _user_at(records, marker)
    return at is not None and any(r.get("type") == "assistant" for r in records[at + 1 :])


def _wait_for(path: Path, done: Any, timeout: float) -> bool | None:
    """True once `done` holds for the events file's records; None at the timeout. Woken
    by the kernel when the file's directory changes (inotify); where there is none (not
    Linux, or no instance left) the file is looked at every _POLL_S."""
    deadline = time.monotonic() + timeout
    with contextlib.ExitStack() as stack:
        changes = _directory_changes(path.parent, stack)
        while True:
            if done(_records(path)):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if changes is None:
                time.sleep(min(remaining, _POLL_S))
                continue
            select.select([changes.fd], [], [], remaining)
            changes.read()


def _directory_changes(directory: Path, stack: contextlib.ExitStack) -> Inotify | None:
    """An inotify descriptor readable when `directory` changes, or None where there is
    none to be had (the caller then looks every _POLL_S)."""
    if platform.portable() or not sys.platform.startswith("linux"):  # inotify: Linux only
        return None
    try:
        changes = stack.enter_context(Inotify())
        if changes.add(str(directory)) is None:
            return None
    except (OSError, ResourceError):
        return None
    return changes

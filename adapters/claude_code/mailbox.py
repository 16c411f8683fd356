"""Claude Code's agent-team mailbox files, written the way Claude itself writes them.

A member of a Claude Code agent team (the lead or a teammate) reads its mailbox,
`<config dir>/teams/<team>/inboxes/<name>.json`, a JSON array of entries. The file's
handling and its lock here are what the pinned Claude Code (2.1.197) does itself, read from its bundled
JavaScript (`.peers/node_modules/@anthropic-ai/claude-code-linux-x64/claude`, the
`[TeammateMailbox]` functions `getInboxPath`, `writeToMailbox`, `markMessagesAsRead`,
`markSingleMessageAsRead`, `clearInbox`); docs/adapters.md cites the details.

Path: the config dir is `$CLAUDE_CONFIG_DIR`, else `~/.claude` (NFC-normalised, as
Claude's `Zn()`); team and agent names go through Claude's own sanitiser (every character
outside `[a-zA-Z0-9_-]` becomes `-`).

Lock: the npm package `proper-lockfile` (4.1.2, bundled into Claude), called as
`lock(inbox, {lockfilePath: inbox + ".lock", retries: {retries: 10, minTimeout: 5,
maxTimeout: 100}})` with the default `stale` of 10 s. Its protocol, followed here:
- acquire = `mkdir("<inbox>.json.lock")` (a directory; atomic). EEXIST: `stat` it; if its
  mtime is older than `stale` (10 s) the holder is presumed dead: `rmdir` it and `mkdir`
  again; otherwise wait (5 ms doubling to 100 ms) and retry;
- the holder stamps the directory's mtime at acquisition, refreshes it every `stale / 2`
  and considers the lock compromised when that mtime changed under it;
- release = `rmdir`.
(The reference, harness-delivery.md §1.3, describes exomonad's own `{path}.lock` *file*,
O_CREAT|O_EXCL with JSON metadata, and its matrix says that does not match Claude's
protocol: right, Claude's lock at that path is a directory.)
Under the lock Claude reads the array, appends (or prunes) and replaces the file with
`<inbox>.tmp.<hex>` + rename. We do the same read-modify-write, with a 0600 temp file,
fsync and rename (readers never see a partial array). Our lock directory gets an mtime
stamp of our own, and before the rename we re-check that the directory is still ours and
younger than `stale` (a holder that stalled that long may have been presumed dead:
nothing is written then); release removes it only if it is still ours. Claude's writer
gives up after its 10 retries (~0.65 s) and drops its message, so our writers also take
turns among themselves and leave the inbox quiet for `WRITE_GAP_S` after any write
(see `append_entry`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.bounded_json import decode

LOCK_STALE_S = 10.0
"""proper-lockfile's default `stale` (Claude's mailbox lock does not override it)."""
LOCK_WAIT_S = 15.0
"""How long we wait for the lock: longer than `stale`, so a dead holder's lock is taken."""
LOCK_MIN_DELAY_S = 0.005
LOCK_MAX_DELAY_S = 0.1
WRITE_GAP_S = 0.12
"""Quiet time our writers leave after any write: more than Claude's longest retry interval."""


def sanitize(name: str) -> str:
    """Claude's `hmt()`: `name.replace(/[^a-zA-Z0-9_-]/g, "-")`."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", name)


def default_config_dir() -> str:
    """Claude's `Zn()`: `$CLAUDE_CONFIG_DIR ?? join(homedir(), ".claude")`, NFC."""
    raw = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
    return unicodedata.normalize("NFC", raw)


class InboxLockTimeout(Exception):
    pass


class InboxLockLost(Exception):
    pass


class InboxDamaged(Exception):
    pass


@dataclass
class _Held:
    path: Path
    ino: int
    mtime_ns: int
    since: float


def _backoff(delay: float) -> None:
    """One wait between lock attempts (a seam for tests that need to see contention)."""
    time.sleep(delay)


def acquire_lock(lock: Path, *, wait_s: float | None = None) -> _Held:
    """proper-lockfile's acquire: mkdir the lock directory; take it over when stale."""
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    delay = LOCK_MIN_DELAY_S
    while True:
        try:
            os.mkdir(lock, 0o700)
        except FileExistsError:
            try:
                st = os.stat(lock)
            except FileNotFoundError:
                continue  # released between our mkdir and stat: try again at once
            if st.st_mtime < time.time() - LOCK_STALE_S:
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(lock)  # a dead holder's lock, as proper-lockfile removes it
                continue
            if time.monotonic() >= deadline:
                raise InboxLockTimeout(
                    f"{lock} held by another writer for more than {wait_s:g}s"
                ) from None
            _backoff(delay)
            delay = min(LOCK_MAX_DELAY_S, delay * 2)
            continue
        # Stamp the directory with a sub-millisecond value of our own (as proper-lockfile
        # stamps its own at acquisition): a successor that reuses the inode number still
        # differs, so we never take someone else's lock directory for ours.
        stamp = time.time_ns() // 1_000_000 * 1_000_000 + secrets.randbelow(1_000_000)
        os.utime(lock, ns=(stamp, stamp))
        st = os.stat(lock)
        return _Held(lock, st.st_ino, st.st_mtime_ns, time.monotonic())


def still_held(held: _Held) -> bool:
    """Our lock directory is still there, unchanged, and younger than `stale`."""
    try:
        st = os.stat(held.path)
    except FileNotFoundError:
        return False
    fresh = time.monotonic() - held.since < LOCK_STALE_S * 0.8
    return fresh and st.st_ino == held.ino and st.st_mtime_ns == held.mtime_ns


def release_lock(held: _Held) -> None:
    """proper-lockfile's release: rmdir (only if the directory is still ours)."""
    try:
        st = os.stat(held.path)
    except FileNotFoundError:
        return
    if (st.st_ino, st.st_mtime_ns) == (held.ino, held.mtime_ns):
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(held.path)


@contextlib.contextmanager
def inbox_lock(inbox: Path, *, wait_s: float | None = None) -> Iterator[_Held]:
    held = acquire_lock(inbox.with_name(inbox.name + ".lock"), wait_s=wait_s)
    try:
        yield held
    finally:
        release_lock(held)


def read_inbox(inbox: Path) -> list[Any] | None:
    """The entries; None when the file does not exist. An empty file (Claude creates it
    with `writeFile(path, "[]", {flag: "wx"})`, not atomically) reads as []."""
    try:
        raw = inbox.read_bytes()
    except FileNotFoundError:
        return None
    return parse_inbox(raw, inbox)


def parse_inbox(raw: bytes, inbox: Path) -> list[Any]:
    if not raw.strip():
        return []
    try:
        entries = decode(raw)
    except ValueError as exc:
        raise InboxDamaged(f"{inbox} is not JSON ({exc}); left as it is") from None
    if not isinstance(entries, list):
        raise InboxDamaged(f"{inbox} is not a JSON array; left as it is")
    return entries


def append_entry(inbox: Path, entry: dict[str, Any], *, wait_s: float | None = None) -> bool:
    """Append under Claude's lock unless an entry with the same `msg_id` is there.

    Returns True when appended, False when it was already present. Claude's writer gives
    up (and drops its message) when the lock stays busy through its 10 retries (~0.65 s,
    probing at most 100 ms apart), so a burst of our writers must not keep the lock busy
    back to back: our writers take turns (a `flock` on the inboxes directory, which Claude
    does not use), and each waits until the inbox has been still for `WRITE_GAP_S`, a
    window in which a waiting Claude writer probes at least once. The lock itself is held
    only for the read, the temp file's write + fsync and the rename; the directory's fsync
    comes after the release.
    """
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    with _writers_turn(inbox.parent, wait_s):
        _let_claude_in(inbox)
        with inbox_lock(inbox, wait_s=wait_s) as held:
            entries = read_inbox(inbox) or []
            if any(isinstance(e, dict) and e.get("msg_id") == entry["msg_id"] for e in entries):
                return False
            entries.append(entry)
            data = json.dumps(entries, ensure_ascii=False, indent=2).encode("utf-8")
            _replace(inbox, data, held)
            with contextlib.suppress(OSError):  # written: never report a failure after this
                os.utime(inbox)  # the next writer's quiet gap counts from the release
        try:
            fd = os.open(inbox.parent, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return True  # the team was removed right after our write: nothing left to sync
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return True


@contextlib.contextmanager
def _writers_turn(directory: Path, wait_s: float) -> Iterator[None]:
    """One writer of ours at a time per inboxes directory (an advisory flock)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + 2 * wait_s
        delay = LOCK_MIN_DELAY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise InboxLockTimeout(
                        f"another actors writer held {directory} for more than {2 * wait_s:g}s"
                    ) from None
                _backoff(delay)
                delay = min(LOCK_MAX_DELAY_S, delay * 2)
        yield
    finally:
        os.close(fd)  # releases the flock


def _let_claude_in(inbox: Path) -> None:
    """Wait until the inbox was last written at least WRITE_GAP_S ago."""
    try:
        age = time.time() - os.stat(inbox).st_mtime
    except FileNotFoundError:
        return
    if 0 <= age < WRITE_GAP_S:
        time.sleep(WRITE_GAP_S - age)


def _replace(inbox: Path, data: bytes, held: _Held) -> None:
    """Claude's atomicWrite (`<inbox>.tmp.<hex>` + rename), 0600 and fsynced, renamed only
    while our lock is still ours."""
    tmp = inbox.with_name(f"{inbox.name}.tmp.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if not still_held(held):
            raise InboxLockLost(f"lost {held.path} before writing; nothing was written")
        os.replace(tmp, inbox)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

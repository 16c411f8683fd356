"""Linux inotify, bare: a descriptor that becomes readable when a watched directory changes.

A long-lived reader (the dashboard) sleeps on this descriptor in its event loop
(`trio.lowlevel.wait_readable`) and wakes only when the kernel has news: no thread, no
timer, nothing stepping while the state root is quiet. watchfiles, which `actors watch`
uses, wakes its thread every step to look for queued events; this is the same kernel
feed without that loop. Linux only, through the C library (ctypes), like the pidfds in
runtime.core.process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from typing import NamedTuple

from runtime.core.errors import ResourceError

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
CHANGES = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
"""What a writer of state files causes: an append, an atomic rename, a new or gone file."""

_HEAD = struct.Struct("iIII")
_NONBLOCK_CLOEXEC = os.O_NONBLOCK | os.O_CLOEXEC


def unavailable(detail: str) -> ResourceError:
    """No inotify to be had (EMFILE from inotify_init1: the user's instances are used
    up, or this process's descriptors): the one line a watcher ends with."""
    return ResourceError(
        f"cannot watch the state root for changes: {detail}",
        hint="raise fs.inotify.max_user_instances (sysctl), or the open-file limit "
        "(`ulimit -n`), or stop other programs that watch files",
    )


class Event(NamedTuple):
    wd: int
    mask: int
    name: str


class Inotify:
    """One inotify instance; `fd` is what an event loop waits on."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = self._libc.inotify_init1(_NONBLOCK_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise unavailable(os.strerror(code)) from OSError(code, os.strerror(code))
        self.fd: int = fd

    def add(self, path: str, mask: int = CHANGES) -> int | None:
        """Watch the directory `path` (never through a link); None when it is gone or
        not a directory. Raises OSError when the watch limit is reached."""
        wd = self._libc.inotify_add_watch(
            self.fd, os.fsencode(path), mask | IN_ONLYDIR | IN_DONT_FOLLOW
        )
        if wd >= 0:
            return int(wd)
        code = ctypes.get_errno()
        if code in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None
        raise OSError(code, f"inotify watch on {path}: {os.strerror(code)}")

    def read(self) -> list[Event]:
        """Every event queued now (none: an empty list)."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return events
            offset = 0
            while offset + _HEAD.size <= len(data):
                wd, mask, _cookie, size = _HEAD.unpack_from(data, offset)
                raw = data[offset + _HEAD.size : offset + _HEAD.size + size]
                events.append(Event(wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
                offset += _HEAD.size + size

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

"""`claude_code`: Claude Code sessions, woken through their own hooks.

The follow-up is durable in the session inbox and the inbox append writes a line to the
session's wake file. A SessionStart hook (`actors hook session-start`) registers the
session and returns that wake file in `watchPaths`; Claude Code's FileChanged hook
(`actors hook file-changed`, run with `asyncRewake`) then fires, prints a one-line
doorbell (unread count and the command that reads them) and exits 2, which wakes the idle
model; the model reads the bodies with `actors inbox read` (level-triggered: all unread
at once, so a coalesced or spurious file event never loses or doubles a follow-up).
`actors install claude-code` writes the hooks and the MCP server entry.

Claude Code 2.1.224+ also binds a per-session messaging socket and exports its path
(CLAUDE_CODE_MESSAGING_SOCKET) and token to its hooks; the SessionStart hook records both
(and `actors spawn` inside the session, from its environment, when the hook did not).
Where a session has one, each follow-up goes through it by default, as the `user` frame
Claude Code 2.1.331 reads (`{"type":"user","session_id":..,"message":{"role":"user",
"content":..}}`, after an `auth` line): an idle session starts a turn with that text
within ~0.2 s (the doorbell waits ~0.5 s for the file watcher to settle, then for a hook
process); observed live in tests/peers/test_claude_messaging.py. The `session_id` makes
a socket path reused by another Claude session drop the frame instead of showing it there.

The socket answers nothing, so what would not be delivered is decided before sending:
Claude holds (and after 5 minutes drops) a message from a sender that states no
permission mode when the session bypasses permissions, unless its settings say
`"crossSessionInbound": "accept"` (adapters/claude_code/gate.py, from what the hooks
recorded); such a follow-up, a socket that refuses the connection (the session ended),
a path that is not a socket of ours (a symlink, another user's: checked on the opened
inode before connecting, SO_PEERCRED after, before the token is written) all leave it to
the doorbell, which the inbox append has rung already. A frame sent is marked read, so
the doorbell stays silent for it (the watcher settles for ~0.5 s first; the send takes
milliseconds). `-o messaging=doorbell` turns the socket off. The receipt's `wake` says
which way it went and why.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from adapters.file import FileAdapter
from runtime.delivery.contract import Capabilities, DeliveryContext, Option, Receipt
from runtime.delivery.render import injected_text

if TYPE_CHECKING:
    from runtime.delivery.doctor import Probe

_CLAUDE_SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class ClaudeCodeAdapter(FileAdapter):
    """The file adapter's delivery (the inbox append rings the wake file); Claude Code's
    own watcher and the FileChanged hook do the waking."""

    capabilities = Capabilities(
        wake_mode="Claude's messaging socket where the session has one (the body starts the"
        " turn); else SessionStart watchPaths + FileChanged hook with asyncRewake on the wake file",
        level="D6",
        notes="socket wake with the body, or doorbell wake with the body self-fetched with"
        " `actors inbox read`; proven by tests/peers",
        native=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option(
            "messaging",
            "socket (the default where the session has one) or doorbell (never the socket)",
            "choice",
            ("socket", "doorbell"),
        ),
        Option(
            "messaging_socket", "CLAUDE_CODE_MESSAGING_SOCKET (recorded by the SessionStart hook)"
        ),
        Option(
            "messaging_token", "CLAUDE_CODE_MESSAGING_TOKEN (recorded by the SessionStart hook)"
        ),
        Option("permission_mode", "the session's permission mode (recorded by its hooks)"),
        Option("inbound", "its effective crossSessionInbound setting (recorded by its hooks)"),
        Option(
            "headless", "a `claude -p` whose Stop hook waits for its runs (recorded by its hooks)"
        ),
    )

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """`actors doctor delivery`: judged from the wake log of our FileChanged hook."""
        from adapters.claude_code.doctor import judge

        judge(probe)

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        receipt = super().receive_message(envelope, context)
        why_not = self.socket_refusal()
        if why_not is not None:
            receipt.metadata["wake"] = f"doorbell ({why_not})"
            return receipt
        try:
            self._post(str(self.options["messaging_socket"]), envelope, context)
        except OSError as exc:
            receipt.metadata["wake"] = f"doorbell (messaging socket: {exc.strerror or exc})"
            return receipt
        receipt.metadata["body_injected"] = True  # the runner marks it read: no doorbell
        receipt.metadata["wake"] = "messaging socket (sent; the socket acknowledges nothing)"
        return receipt

    def socket_refusal(self) -> str | None:
        """None when this follow-up goes through the messaging socket; else why not."""
        from adapters.claude_code.gate import socket_held

        if self.options.get("messaging") == "doorbell":
            return "-o messaging=doorbell"
        if self.options.get("headless") == "true":
            return "a headless `claude -p`: its Stop hook hands follow-ups over"
        if not self.options.get("messaging_socket"):
            return "no messaging socket recorded for the session (Claude Code >= 2.1.224 has one)"
        held = socket_held(self.options)
        return None if held is None else f"messaging socket not used: {held}"

    def _post(self, path: str, envelope: dict[str, Any], context: DeliveryContext) -> None:
        """One connection: the optional `auth` line, then one `user` frame, then EOF (the
        socket never answers; Claude Code closes a connection idle for 30 s)."""
        lines: list[dict[str, Any]] = []
        if self.options.get("messaging_token"):
            lines.append({"type": "auth", "token": self.options["messaging_token"]})
        frame: dict[str, Any] = {
            "type": "user",
            "message": {"role": "user", "content": injected_text(envelope, context)},
        }
        if _CLAUDE_SESSION_ID.match(str(self.session.get("id") or "")):
            # a session the SessionStart hook registered under Claude's own id: Claude drops
            # the frame when the socket now belongs to another session
            frame["session_id"] = self.session["id"]
        lines.append(frame)
        from runtime.core.listeners import foreign_peer

        with own_socket(path) as target, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(target)
            owner = foreign_peer(conn)
            if owner is not None:
                # the socket is not our Claude's (gone, its path taken): the token stays here
                raise PermissionError(f"the socket belongs to uid {owner}, not you")
            conn.sendall(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            with contextlib.suppress(OSError):  # the whole frame is out: the close ends it too
                conn.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def own_socket(path: str) -> Iterator[str]:
    """A name to connect to that is exactly the socket inode at `path`, checked to be a
    socket of this user's and not reached through a symlink (O_PATH | O_NOFOLLOW, then
    /proc/self/fd/N, so nothing can swap the path between the check and the connect);
    raises PermissionError (an OSError: the caller rings the doorbell) otherwise."""
    if not hasattr(os, "O_PATH"):  # not Linux: the check is on the path, SO_PEERCRED after
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            raise PermissionError(errno.EPERM, "the socket path is not a socket of yours")
        yield path
        return
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISLNK(st.st_mode):
            raise PermissionError(errno.ELOOP, "the socket path is a symlink")
        if not stat.S_ISSOCK(st.st_mode):
            raise PermissionError(errno.ENOTSOCK, "the socket path is not a socket")
        if st.st_uid != os.getuid():
            raise PermissionError(errno.EPERM, f"the socket belongs to uid {st.st_uid}")
        yield f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else path
    finally:
        os.close(fd)

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
(CLAUDE_CODE_MESSAGING_SOCKET) and token to its hooks; the SessionStart hook records both.
Opted in (`-o messaging=socket`), the body is also sent through it as the `user` frame
Claude Code 2.1.331 reads (`{"type":"user","session_id":..,"message":{"role":"user",
"content":..}}`, after an `auth` line): an idle session starts a turn with that text
(observed live, tests/peers/test_claude_messaging.py), and the `session_id` makes a
socket path reused by another Claude session drop the frame instead of showing it
there. The socket answers nothing, so the send is `triggered`; the inbox entry is
marked read so the doorbell does not ring for it too. A socket that does not accept the
connection, or whose listener is another user's (SO_PEERCRED, checked before the token
is written: a socket path taken over after Claude exited), leaves the doorbell path
alone to do the delivery.
"""

from __future__ import annotations

import json
import re
import socket
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
        wake_mode="SessionStart watchPaths + FileChanged hook with asyncRewake on the wake file",
        level="D6",
        notes="doorbell wake, body self-fetched with `actors inbox read`; proven by tests/peers",
        native=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option(
            "messaging",
            "socket: also send the body through Claude Code's messaging socket (2.1.224+)",
            "choice",
            ("socket",),
        ),
        Option(
            "messaging_socket", "CLAUDE_CODE_MESSAGING_SOCKET (recorded by the SessionStart hook)"
        ),
        Option(
            "messaging_token", "CLAUDE_CODE_MESSAGING_TOKEN (recorded by the SessionStart hook)"
        ),
    )

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """`actors doctor delivery`: judged from the wake log of our FileChanged hook."""
        from adapters.claude_code.doctor import judge

        judge(probe)

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        receipt = super().receive_message(envelope, context)
        path = self.options.get("messaging_socket")
        if self.options.get("messaging") != "socket" or not path:
            return receipt
        try:
            self._post(path, envelope, context)
        except OSError as exc:
            receipt.metadata["messaging_socket"] = (
                f"not sent ({exc.strerror or exc}); doorbell only"
            )
            return receipt
        receipt.observed.append("triggered")
        receipt.metadata["body_injected"] = True  # the runner marks it read: no doorbell
        receipt.metadata["messaging_socket"] = "sent (the socket sends no acknowledgement)"
        return receipt

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

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(path)
            owner = foreign_peer(conn)
            if owner is not None:
                # the socket is not our Claude's (gone, its path taken): the token stays here
                raise PermissionError(f"the socket belongs to uid {owner}, not you")
            conn.sendall(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            conn.shutdown(socket.SHUT_WR)

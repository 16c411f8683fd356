"""`claude_code`: Claude Code sessions, woken through their own hooks.

The follow-up is durable in the session inbox and the inbox append writes a line to the
session's wake file. A SessionStart hook (`actors hook session-start`) registers the
session and returns that wake file in `watchPaths`; Claude Code's FileChanged hook
(`actors hook file-changed`, run with `asyncRewake`) then fires, prints a one-line
doorbell (unread count and the command that reads them) and exits 2, which wakes the idle
model; the model reads the bodies with `actors inbox read` (level-triggered: all unread
at once, so a coalesced or spurious file event never loses or doubles a follow-up).
`actors install claude-code` writes the hooks and the MCP server entry.

Claude Code 2.1.224+ also exports a per-session messaging socket
(CLAUDE_CODE_MESSAGING_SOCKET), which the SessionStart hook records. Its `user` frame is
undocumented and it sends no acknowledgement, and the pinned peer (2.1.197) predates it,
so delivering through it is UNVERIFIED and opt-in (`-o messaging=socket`): the body is
sent as a `user` line and the inbox entry marked read, so the doorbell does not ring a
second time. Without the opt-in the doorbell path above is the only one.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Any

from adapters.file import FileAdapter
from runtime.delivery.contract import Capabilities, DeliveryContext, Option, Receipt
from runtime.delivery.render import injected_text

if TYPE_CHECKING:
    from runtime.delivery.doctor import Probe


class ClaudeCodeAdapter(FileAdapter):
    """The file adapter's delivery (the inbox append rings the wake file); Claude Code's
    own watcher and the FileChanged hook do the waking."""

    capabilities = Capabilities(
        wake_mode="SessionStart watchPaths + FileChanged hook with asyncRewake on the wake file",
        level="D6",
        notes="doorbell wake, body self-fetched with `actors inbox read`; proven by tests/peers",
        native=True,
    )
    OPTIONS = (
        Option(
            "messaging",
            "socket: also send through Claude Code's messaging socket (unverified)",
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

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, options)
        self.options = options

    @staticmethod
    def judge_probe(probe: Probe) -> None:
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
        receipt.metadata["messaging_socket"] = "sent (unverified: no acknowledgement exists)"
        return receipt

    def _post(self, path: str, envelope: dict[str, Any], context: DeliveryContext) -> None:
        lines = []
        if self.options.get("messaging_token"):
            lines.append({"type": "auth", "token": self.options["messaging_token"]})
        lines.append(
            {"type": "user", "msgId": context.delivery_id, "text": injected_text(envelope, context)}
        )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(path)
            conn.sendall(b"".join(json.dumps(line).encode() + b"\n" for line in lines))

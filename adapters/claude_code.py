"""`claude_code`: Claude Code sessions, woken through their own hooks.

The follow-up is durable in the session inbox and the inbox append writes a line to the
session's wake file. A SessionStart hook (`actors hook session-start`) registers the
session and returns that wake file in `watchPaths`; Claude Code's FileChanged hook
(`actors hook file-changed`, run with `asyncRewake`) then fires, prints a one-line
doorbell (unread count and the command that reads them) and exits 2, which wakes the idle
model; the model reads the bodies with `actors inbox read` (level-triggered: all unread
at once, so a coalesced or spurious file event never loses or doubles a follow-up).
`actors install claude-code` writes the hooks and the MCP server entry.
"""

from __future__ import annotations

from adapters.base import Capabilities
from adapters.file import FileAdapter


class ClaudeCodeAdapter(FileAdapter):
    """The file adapter's delivery (the inbox append rings the wake file); Claude Code's
    own watcher and the FileChanged hook do the waking."""

    capabilities = Capabilities(
        wake_mode="SessionStart watchPaths + FileChanged hook with asyncRewake on the wake file",
        level="D6",
        notes="D6 per the seed matrix (doorbell wake, body self-fetched); proven live by the peers tier",
    )

"""Claude Code's inbound gate on its messaging socket, as 2.1.331 decides it.

A message on the socket from a sender that is not one of the session's own child
processes is delivered, held for the user's approval, or refused:

- an explicit `crossSessionInbound` setting wins: `accept` delivers, `hold` holds,
  `refuse` refuses (an unknown value holds). User (or managed) settings decide first;
  a project's `.claude/settings.json` / `settings.local.json` may only tighten it;
- unset, the permission-mode parity rule: a sender that states no permission mode (we
  state none: we are not a Claude session) is delivered to a session that prompts for
  permissions and held in one that bypasses them (`bypassPermissions`; `plan` entered from
  such a session counts as bypassing, which a hook cannot tell apart, so `plan` counts as
  unknown); a mode Claude does not know holds too.

A held message is shown to a terminal user for approval and dropped after `dialogExpiry`
(5 minutes); a headless `claude -p` has nothing to approve with, so it is dropped then.
The socket answers nothing either way, so the sender cannot see the hold: this module
decides beforehand, from what the session's hooks recorded (`permission_mode` from
UserPromptSubmit / PreToolUse input, `inbound` from its settings files), and the
adapter rings the doorbell instead of sending what would be held. Observed live in
tests/peers/test_claude_messaging.py (a `bypassPermissions` session reports
`peer_message_hold` with cause `no-mode-asserted`; `"crossSessionInbound": "accept"`
delivers). Not seen from here: a sender Claude verifies as the session's own child
(always delivered: costs only the doorbell's extra ~0.5 s), a mode changed (shift+tab)
after the last prompt or tool call (the next one records it), and a `--settings` file on
Claude's command line (it ranks with user settings): a `hold` or `refuse` there is
missed, and the follow-up, marked read when sent, waits in Claude's approval queue (5
minutes) instead of ringing the doorbell.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

PROMPTING = frozenset({"default", "acceptEdits", "auto", "dontAsk"})
"""Permission modes Claude counts as prompting: a sender stating no mode is delivered."""
BYPASSING = frozenset({"bypassPermissions"})
INBOUND_VALUES = ("accept", "hold", "refuse")
_STRICTNESS = {"accept": 0, "hold": 1, "refuse": 2}
MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
SETTING_LINE = '"crossSessionInbound": "accept"'


def inbound_setting(config_dir: Path, cwd: Path | None) -> str | None:
    """The effective `crossSessionInbound` for a session in `cwd` ("invalid" for a value
    Claude does not know, None when nothing sets it): managed, then user settings; the
    project's files only tighten. Unreadable or damaged files count as not setting it
    (Claude warns about them itself)."""
    value: str | None = None
    for path in (MANAGED_SETTINGS, config_dir / "settings.json"):
        found = _read(path)
        if found is not None:
            value = found
            break
    if cwd is not None:
        for path in (cwd / ".claude" / "settings.json", cwd / ".claude" / "settings.local.json"):
            found = _read(path)
            if found is None:
                continue
            if found == "invalid" or value == "invalid":
                value = "invalid"
            elif _STRICTNESS[found] > _STRICTNESS[value or "accept"]:
                value = found
    return value


def _read(path: Path) -> str | None:
    """A project's settings files are the project's to choose (a cloned repository's): a
    FIFO, or a link to one or to a device, counts as not setting anything, and opening it
    never blocks (O_NONBLOCK) the hook Claude runs on every prompt."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data: Any = json.loads(handle.read(1_000_000))  # small; bounded anyway
    except (OSError, ValueError):
        return None
    raw = data.get("crossSessionInbound") if isinstance(data, dict) else None
    if raw is None:
        return None
    return raw if raw in INBOUND_VALUES else "invalid"


def config_dir() -> Path:
    """Claude Code's user config directory, as a hook it runs sees it."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def socket_held(options: dict[str, Any]) -> str | None:
    """None when Claude delivers a socket message from us to this session; otherwise why
    it would not (held or refused), in words for the receipt and `actors doctor`."""
    inbound = options.get("inbound")
    if inbound == "accept":
        return None
    if inbound in ("hold", "refuse"):
        return f'its settings say "crossSessionInbound": "{inbound}"'
    if inbound is not None:
        return 'its settings have an unknown "crossSessionInbound" value (Claude holds)'
    mode = options.get("permission_mode")
    if mode in PROMPTING:
        return None
    if mode in BYPASSING:
        return f"it runs in {mode} and we state no permission mode: Claude would hold it"
    if mode is None:
        if options.get("messaging") == "socket":
            return None  # registered by hand with the socket asked for: no hook records it
        return "its permission mode is not known yet (recorded at its first prompt)"
    return f"permission mode {str(mode)[:40]!r} may bypass prompts: Claude could hold it"


def advice() -> str:
    """How a user lets the socket deliver to sessions that bypass permissions."""
    return (
        f"to wake them through the socket too, set {SETTING_LINE} in Claude's user"
        " settings (`actors install claude-code --cross-session-inbound accept`); messages"
        " from your other local senders then reach Claude without review"
    )

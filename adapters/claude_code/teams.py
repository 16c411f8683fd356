"""`claude_teams`: a follow-up written into a Claude Code agent-team inbox file.

The inbox file, its path and Claude's lock protocol are adapters/claude_code/mailbox.py
(docs/adapters.md cites the details); this module is the entry we write and how its
reading is observed.

Entry (Claude's `writeToMailbox` writes `{...message, msgV: 1, msg_id: randomUUID(),
type: "message", read: false}` with `timestamp = new Date().toISOString()`):
`{"from", "text", "summary", "timestamp", "msgV": 1, "msg_id", "type": "message",
"read": false}`. `text` is `runtime.delivery.render.injected_text` (it names the delivery id);
`summary` is ours (the type and sender as plain tokens): Claude shows it outside the
fenced text. `msg_id` is a UUID derived from the delivery id (uuid5), which makes a
second attempt with the same delivery id find its entry instead of appending another.

Reading: Claude 2.1.197's InboxPoller (every 1 s, interactive sessions of team members)
takes the unread entries, submits them as a `<teammate-message>` turn when the session is
idle or queues them in memory while it is busy, and then *removes* them from the file
(`markMessagesAsRead` keeps only entries still unread). Older builds (2.1.39, per the
exomonad bridge in the reference) flip `read` to true instead. So: `read: true` on our
entry -> `delivered` (observed `injected`); our entry gone from a file that still exists
-> `delivered` (observed `woke`: the recipient's poller took it; a teammate respawn, which
clears its inbox, cannot be told apart); not seen either way within `confirm_timeout` ->
`accepted` (final: never appended twice).

Options: `team`, `name` (the recipient: `team-lead` or a teammate's name), `home` (Claude's
config dir; registration records `$CLAUDE_CONFIG_DIR` or `~/.claude`), `confirm_timeout`
seconds (default 0: do not wait for the read).
"""

from __future__ import annotations

import os
import time
import unicodedata
import uuid
from pathlib import Path
from typing import Any, ClassVar

from adapters.claude_code.mailbox import (
    InboxDamaged,
    InboxLockLost,
    InboxLockTimeout,
    append_entry,
    default_config_dir,
    parse_inbox,
    sanitize,
)
from runtime.core.ids import now_iso
from runtime.delivery.contract import (
    AdapterBase,
    AdapterError,
    Capabilities,
    DeliveryContext,
    Option,
    Receipt,
)
from runtime.delivery.render import injected_text, token
from runtime.store.writes import ensure_dir

POLL_S = 0.05
"""How often the inbox is re-read while waiting for the recipient to read our entry."""
MSG_ID_NAMESPACE = uuid.UUID("6f1f3c52-2b55-4c07-9d0a-7c1ad5e5a0c1")
SUMMARY_CHARS = 200


def msg_id_for(delivery_id: str) -> str:
    return str(uuid.uuid5(MSG_ID_NAMESPACE, delivery_id))


class ClaudeTeamsAdapter(AdapterBase):
    capabilities = Capabilities(
        wake_mode="entry in the Claude agent-team inbox teams/<team>/inboxes/<name>.json",
        level="D3",
        modes=("immediate", "on-idle", "manual"),
        notes=(
            "proven at the file level only: Claude's lock, entry schema, concurrency, the"
            " read/removal observation (D3: addressed durable enqueue). Claude Code 2.1.197 and"
            " 2.1.331 both still carry the reader (TeammateMailbox, InboxPoller: an idle team"
            " member would get the text as a <teammate-message> turn, D6 by design), but only"
            " inside an agent team (2.1.331: CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS=1 or"
            " --agent-teams, no TeamCreate tool); `claude -p` made no team directory there, so"
            " no live reader was observed. Team members only; the team directory goes when"
            " its session ends"
        ),
        native=True,
        injects=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("team", "the agent team's name, as in ~/.claude/teams/TEAM"),
        Option("name", "the recipient: team-lead or a teammate's name"),
        Option("home", "Claude's config dir (default $CLAUDE_CONFIG_DIR or ~/.claude)"),
        Option("confirm_timeout", "seconds to wait for the read (default 0)", "seconds"),
    )

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        self.options = _parse(options)
        self.session = session

    @staticmethod
    def check_options(options: dict[str, str]) -> dict[str, str]:
        """Registration: the options parse and the team exists (records `home`)."""
        parsed = _parse(options)
        team_dir = _team_dir(parsed)
        if not team_dir.is_dir():
            raise AdapterError(
                f"claude_teams: no agent team {parsed['team']!r} at {team_dir}"
                " (create the team in Claude Code first, or pass -o home=CLAUDE_CONFIG_DIR)"
            )
        options.setdefault("home", parsed["home"])  # the runner may not share our env
        return options

    def inbox_path(self) -> Path:
        return _team_dir(self.options) / "inboxes" / f"{sanitize(self.options['name'])}.json"

    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        ident = context.delivery_id
        inbox = self.inbox_path()
        team_dir = _team_dir(self.options)
        if not team_dir.is_dir():
            return Receipt(
                "failed",
                ident,
                retryable=False,
                reason=f"no agent team at {team_dir} (Claude removes it when the team's session ends)",
            )
        kind = token(envelope.get("type") or "message")
        sender = token(envelope.get("from") or "actors")
        entry = {
            "from": sender,
            "text": injected_text(envelope, context),
            # Claude shows it outside our fence: our words and tokens, no run-written text
            "summary": f"actors follow-up {kind} from {sender}"[:SUMMARY_CHARS],
            "timestamp": now_iso(),  # the form of `new Date().toISOString()`
            "msgV": 1,
            "msg_id": msg_id_for(ident),
            "type": "message",
            "read": False,
        }
        meta: dict[str, Any] = {"inbox": str(inbox), "msg_id": entry["msg_id"]}
        try:
            ensure_dir(inbox.parent, tighten=False)
            appended = append_entry(inbox, entry)
        except (InboxLockTimeout, InboxLockLost, InboxDamaged) as exc:
            return Receipt("failed", ident, retryable=True, reason=str(exc), metadata=meta)
        except OSError as exc:
            return Receipt(
                "failed",
                ident,
                retryable=True,
                reason=f"cannot write {inbox}: {exc.strerror or exc}",
                metadata=meta,
            )
        meta["appended"] = appended
        return self._confirm(inbox, ident, meta)

    def _confirm(self, inbox: Path, ident: str, meta: dict[str, Any]) -> Receipt:
        """Wait up to confirm_timeout for the recipient to read (or remove) our entry."""
        timeout = float(self.options["confirm_timeout"])
        deadline = time.monotonic() + timeout
        while True:
            seen = self._look(inbox, ident, meta)
            if seen is not None:
                return seen
            if time.monotonic() >= deadline:
                why = (
                    f"in the inbox, not read within {timeout:g}s"
                    if timeout > 0
                    else "in the inbox (confirm_timeout=0: the read was not waited for)"
                )
                return Receipt(
                    "accepted", ident, observed=["queued", "triggered"], reason=why, metadata=meta
                )
            time.sleep(POLL_S)

    @staticmethod
    def _look(inbox: Path, ident: str, meta: dict[str, Any]) -> Receipt | None:
        """A final receipt if the entry was read, removed, or its inbox is gone; else None."""
        try:
            raw = inbox.read_bytes()
        except FileNotFoundError:
            raw = None
        except OSError:
            return None
        if raw is None:
            return Receipt(
                "accepted",
                ident,
                observed=["queued", "triggered"],
                reason="the inbox file was removed before the entry was seen read (team ended?)",
                metadata=meta,
            )
        if not raw.strip():
            return None  # Claude creating the file (empty, then "[]"): look again
        try:
            entries = parse_inbox(raw, inbox)
        except InboxDamaged:
            return None  # being rewritten by a writer that does not rename: look again
        ours = [e for e in entries if isinstance(e, dict) and e.get("msg_id") == meta["msg_id"]]
        if ours and ours[0].get("read") is True:
            return Receipt(
                "delivered",
                ident,
                observed=["queued", "triggered", "injected"],
                metadata={**meta, "read_by": "read:true", "body_injected": True},
            )
        if not ours:  # it was there under the lock: only a reader takes an entry out
            return Receipt(
                "delivered",
                ident,
                observed=["queued", "triggered", "woke"],
                reason="the recipient's poller took the entry out of the inbox (Claude 2.1.197"
                " removes what it read; a teammate respawn clearing the inbox looks the same)",
                metadata={**meta, "read_by": "removed", "body_injected": True},
            )
        return None


def _team_dir(options: dict[str, str]) -> Path:
    return Path(options["home"]) / "teams" / sanitize(options["team"])


def _parse(options: dict[str, str]) -> dict[str, str]:
    """Check the options' shape; returns a copy with `home` and `confirm_timeout` filled."""
    out = dict(options)
    for key, what in (
        ("team", "the agent team's name, as in ~/.claude/teams/TEAM"),
        ("name", "the recipient: team-lead or a teammate's name"),
    ):
        if not out.get(key, "").strip():
            raise AdapterError(f"claude_teams needs -o {key}={key.upper()} ({what})")
    home = os.path.expanduser(out.get("home") or default_config_dir())
    if not os.path.isabs(home):
        raise AdapterError(
            f"claude_teams home must be an absolute path (Claude's config dir), not {home!r}"
        )
    out["home"] = unicodedata.normalize("NFC", home)
    raw = out.get("confirm_timeout", "0")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise AdapterError(f"claude_teams confirm_timeout must be seconds >= 0, not {raw!r}")
    out["confirm_timeout"] = str(seconds)
    return out

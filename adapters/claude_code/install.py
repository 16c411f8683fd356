"""`actors install claude-code`: the MCP server (`~/.claude.json` for the user, the
default; `.mcp.json` in the project) and, in `settings.json` (`~/.claude/`, or
`.claude/` in the project; `$CLAUDE_CONFIG_DIR` moves the user files):
- our hooks: SessionStart, FileChanged (asyncRewake; not with `--wake watcher`) and the
  boundary hooks UserPromptSubmit / PreToolUse that hand over `next-message` /
  `next-tool-call` follow-ups (adapters/claude_code/hooks.py runs them), and Stop, where
  a headless `claude -p` waits for its runs (adapters/claude_code/stop.py);
- `permissions.allow` for the tools that change nothing outside this session
  (QUIET_TOOLS), so neither a prompt nor `claude -p` stops at them; `spawn` and
  `message` start and steer commands, so they stay the user's decision;
- `statusLine`: `actors status --line --stdin` (this session's active runs); a status
  line the user already has is kept and composed: our command runs theirs (`--then`)
  and appends to its output, and uninstall puts their command back;
- with `--cross-session-inbound accept` only (user scope), `"crossSessionInbound": "accept"`: Claude
  then delivers follow-ups sent through its messaging socket to sessions that bypass
  permissions too, instead of holding them for review (adapters/claude_code/gate.py);
  uninstall takes it out again when it is still ours.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from adapters.install_edits import Change, Edit, json_edit, mcp_entry

QUIET_TOOLS = ("inspect", "result", "recipes", "inbox_read")
"""The actors MCP tools allowed without asking (Claude Code names them mcp__actors__NAME):
they read runs, results, recipes and this session's own follow-ups."""
STATUS_LINE = "status --line --stdin"
"""Our status line command, after the actors command; `--then CMD` composes theirs."""
STATUS_REFRESH_S = 5
"""How often Claude Code re-runs a status line that is only ours (it also re-runs it on
every conversation update), so a run ending while the session is idle shows."""
HEADLESS = (
    "headless `claude -p`: add --allowedTools mcp__actors to let the model spawn and message"
    " runs (the read-only tools are already allowed)"
)


INBOUND_STEP = (
    "sessions that bypass permissions (--dangerously-skip-permissions) hold follow-ups sent"
    " through Claude's messaging socket, so actors rings the doorbell there (about 0.5 s"
    " slower); `actors install claude-code --cross-session-inbound accept` sets"
    ' "crossSessionInbound": "accept" (then messages from any of your local senders reach'
    " Claude without review)"
)


def next_steps(scope: str) -> list[str]:
    """What the user still has to do, printed after install."""
    from adapters.claude_code.gate import config_dir, inbound_setting

    steps = [HEADLESS]
    if inbound_setting(config_dir(), Path.cwd()) != "accept":
        steps.append(INBOUND_STEP)
    if scope == "project":
        steps.insert(0, "run `claude` here once and approve the actors server of .mcp.json")
    return steps


_OUR_HOOKS = (
    "hook session-start",
    "hook file-changed",
    "hook user-prompt-submit",
    "hook pre-tool-use",
    "hook stop",
)
STOP_TIMEOUT_S = 3600
"""Claude's timeout for our Stop hook: above ACTORS_STOP_WAIT's default (600 s), so the
hook ends its own wait; a longer ACTORS_STOP_WAIT is cut here."""


def plan(scope: str, wake: str, command: list[str], *, inbound: str | None = None) -> list[Edit]:
    """The MCP entry and the hooks, for `command` (how Claude Code starts us); `inbound`
    ("accept"): the crossSessionInbound setting too."""
    home = Path.home()
    config_dir = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    if scope == "project":
        mcp_file, settings = Path.cwd() / ".mcp.json", Path.cwd() / ".claude" / "settings.json"
    else:
        mcp_file = (
            (config_dir / ".claude.json")
            if os.environ.get("CLAUDE_CONFIG_DIR")
            else home / ".claude.json"
        )
        settings = config_dir / "settings.json"
    entry: dict[str, Any] = {"type": "stdio", "command": command[0], "args": [*command[1:], "mcp"]}
    cmd = shlex.join(command)
    hooks = ", ".join(_groups(cmd, wake))
    return [
        json_edit(mcp_file, *mcp_entry("mcpServers", entry), what="MCP server actors"),
        json_edit(
            settings,
            *_settings(cmd, wake, inbound),
            what=f"hooks {hooks}; permissions.allow {', '.join(_allowed())}; statusLine"
            + (f"; crossSessionInbound {inbound}" if inbound else ""),
        ),
    ]


def _allowed() -> list[str]:
    return [f"mcp__actors__{name}" for name in QUIET_TOOLS]


def _settings(cmd: str, wake: str, inbound: str | None = None) -> Change:
    """Hooks, permissions and the status line (and `inbound`), as one change of
    settings.json."""
    put_hooks, take_hooks = _hooks(cmd, wake)
    put_line, take_line = _status_line(cmd)

    def put(data: dict[str, Any]) -> dict[str, Any]:
        put_hooks(data)
        put_line(data)
        permissions = data.setdefault("permissions", {})
        allow = permissions.setdefault("allow", [])
        added = [rule for rule in _allowed() if rule not in allow]
        allow.extend(added)
        if inbound and data.get("crossSessionInbound") != inbound:
            data["crossSessionInbound"] = inbound
            return {"allow": added, "inbound": [inbound]}
        return {"allow": added}

    def take(data: dict[str, Any], added: Any = None) -> None:
        take_hooks(data, None)
        take_line(data, None)
        if isinstance(added, dict) and data.get("crossSessionInbound") in added.get("inbound", []):
            del data["crossSessionInbound"]  # still ours: a value the user set since stays
        ours = added.get("allow", []) if isinstance(added, dict) else _allowed()
        permissions = data.get("permissions")
        if not isinstance(permissions, dict) or not isinstance(permissions.get("allow"), list):
            return
        permissions["allow"] = [rule for rule in permissions["allow"] if rule not in ours]
        if not permissions["allow"]:
            del permissions["allow"]
        if not permissions:
            del data["permissions"]

    return put, take


def _status_line(cmd: str) -> Change:
    """`statusLine`: ours alone, or wrapping the user's command (kept verbatim after
    `--then`, which is how uninstall restores it without any other record)."""
    ours = f"{cmd} {STATUS_LINE}"

    def is_ours(line: Any) -> bool:  # also when the actors command moved since install
        return isinstance(line, dict) and f" {STATUS_LINE}" in str(line.get("command", ""))

    def put(data: dict[str, Any]) -> None:
        line = data.get("statusLine")
        if is_ours(line):
            return
        if isinstance(line, dict) and line.get("command"):
            theirs = str(line["command"])
            data["statusLine"] = {**line, "command": f"{ours} --then {shlex.quote(theirs)}"}
        elif line is None:
            data["statusLine"] = {
                "type": "command",
                "command": ours,
                "refreshInterval": STATUS_REFRESH_S,
            }

    def take(data: dict[str, Any], added: Any = None) -> None:
        line = data.get("statusLine")
        if not isinstance(line, dict) or not is_ours(line):
            return
        try:
            words = shlex.split(str(line["command"]))
        except ValueError:  # edited by hand into something unparsable: ours alone goes
            words = []
        if "--then" in words[:-1]:
            data["statusLine"] = {**line, "command": words[words.index("--then") + 1]}
        else:
            del data["statusLine"]

    return put, take


def _is_ours(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    if not isinstance(hooks, list) or not hooks:
        return False
    return all(
        isinstance(h, dict) and str(h.get("command", "")).endswith(_OUR_HOOKS) for h in hooks
    )


def _groups(cmd: str, wake: str) -> dict[str, Any]:
    """Our hook group per Claude Code event."""
    start = f"{cmd} hook session-start" + (" --wake watcher" if wake == "watcher" else "")
    ours: dict[str, Any] = {
        "SessionStart": {"hooks": [{"type": "command", "command": start}]},
        "FileChanged": {
            "hooks": [
                {
                    "type": "command",
                    "command": f"{cmd} hook file-changed",
                    "asyncRewake": True,
                    # without these the model reads a follow-up as "Stop hook blocking
                    # error" (fields marked internal in Claude Code 2.1; honoured there,
                    # ignored where unknown)
                    "rewakeSummary": "actors: follow-ups to read",
                    "rewakeMessage": "actors follow-ups arrived:",
                }
            ]
        },
        # boundary modes: silent unless a follow-up waits for this boundary; the timeout
        # (s) bounds what a stuck hook could cost a prompt or a tool call
        "UserPromptSubmit": {
            "hooks": [
                {"type": "command", "command": f"{cmd} hook user-prompt-submit", "timeout": 10}
            ]
        },
        "PreToolUse": {
            "hooks": [{"type": "command", "command": f"{cmd} hook pre-tool-use", "timeout": 10}]
        },
        # a headless `claude -p` waits here for its runs' follow-ups (any other session
        # leaves at once): adapters/claude_code/stop.py
        "Stop": {
            "hooks": [{"type": "command", "command": f"{cmd} hook stop", "timeout": STOP_TIMEOUT_S}]
        },
    }
    if wake == "watcher":  # the agent runs `actors inbox wait` in the background instead
        del ours["FileChanged"]
    return ours


def _hooks(cmd: str, wake: str = "hook") -> Change:
    ours = _groups(cmd, wake)

    def put(data: dict[str, Any]) -> None:
        hooks = data.setdefault("hooks", {})
        for event, group in ours.items():
            groups = hooks.setdefault(event, [])
            if group not in groups:
                groups[:] = [g for g in groups if not _is_ours(g)] + [group]

    def take(data: dict[str, Any], added: Any = None) -> None:
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return
        for event in ours:
            groups = hooks.get(event)
            if isinstance(groups, list):
                kept = [g for g in groups if not _is_ours(g)]
                if kept:
                    hooks[event] = kept
                else:
                    hooks.pop(event, None)
        if not hooks:
            data.pop("hooks", None)

    return put, take

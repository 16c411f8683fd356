"""`actors install` / `uninstall`: merge our entries into a harness's config files.

Each edit is a merge, never a rewrite: other MCP servers, hooks and settings stay as they
are, a second install changes nothing, and the file's bytes before the first install are
kept as `<file>.actors-backup`. `uninstall` restores those exact bytes when the file is
still what we wrote; if someone edited it since, it removes only our entries.

Written per harness and scope:
- claude-code: the MCP server (`.mcp.json` in the project, `~/.claude.json` for the user)
  and the SessionStart / FileChanged (asyncRewake) hooks, plus the boundary hooks
  UserPromptSubmit / PreToolUse that hand over `next-message` / `next-tool-call`
  follow-ups (`.claude/settings.json` / `~/.claude/settings.json`; `$CLAUDE_CONFIG_DIR`
  moves the user files);
- codex: `[mcp_servers.actors]` in `$CODEX_HOME/config.toml` (user scope only);
- opencode: `mcp.actors` in `opencode.json` / `~/.config/opencode/opencode.json`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core import config
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_bytes_atomic, write_json_atomic

HARNESSES = ("claude-code", "codex", "opencode")
TOML_BEGIN = "# >>> actors (managed by `actors install`; `actors uninstall` removes it)\n"
TOML_END = "# <<< actors\n"


def actors_command() -> list[str]:
    """How a harness should start us: the installed script, else this interpreter."""
    found = shutil.which("actors")
    return [found] if found else [sys.executable, "-m", "actors"]


@dataclass
class Edit:
    path: Path
    add: Callable[[str | None], str]
    remove: Callable[[str], str]


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{path} is not valid JSON (line {exc.lineno}): fix it first; nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _json_edit(
    path: Path, put: Callable[[dict[str, Any]], None], take: Callable[[dict[str, Any]], None]
) -> Edit:
    def add(text: str | None) -> str:
        data = _load_json(path, text)
        before = json.dumps(data, sort_keys=True)
        put(data)
        if text and json.dumps(data, sort_keys=True) == before:
            return text  # already installed: keep the bytes as they are
        return _dump(data)

    def remove(text: str) -> str:
        data = _load_json(path, text)
        before = json.dumps(data, sort_keys=True)
        take(data)
        return text if json.dumps(data, sort_keys=True) == before else _dump(data)

    return Edit(path, add, remove)


def _mcp_entry(
    container: str, entry: dict[str, Any]
) -> tuple[Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]:
    def put(data: dict[str, Any]) -> None:
        data.setdefault(container, {})["actors"] = entry

    def take(data: dict[str, Any]) -> None:
        servers = data.get(container)
        if isinstance(servers, dict) and "actors" in servers:
            del servers["actors"]
            if not servers:
                del data[container]

    return put, take


def _is_ours(group: Any) -> bool:
    hooks = group.get("hooks") if isinstance(group, dict) else None
    if not isinstance(hooks, list) or not hooks:
        return False
    return all(
        isinstance(h, dict)
        and str(h.get("command", "")).endswith(
            (
                "hook session-start",
                "hook file-changed",
                "hook user-prompt-submit",
                "hook pre-tool-use",
            )
        )
        for h in hooks
    )


def _claude_hooks(
    cmd: str, wake: str = "hook"
) -> tuple[Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], None]]:
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
    }
    if wake == "watcher":  # the agent runs `actors inbox wait` in the background instead
        del ours["FileChanged"]

    def put(data: dict[str, Any]) -> None:
        hooks = data.setdefault("hooks", {})
        for event, group in ours.items():
            groups = hooks.setdefault(event, [])
            if group not in groups:
                groups[:] = [g for g in groups if not _is_ours(g)] + [group]

    def take(data: dict[str, Any]) -> None:
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


def _toml_edit(path: Path, block: str) -> Edit:
    def add(text: str | None) -> str:
        text = text or ""
        if TOML_BEGIN in text:
            return text
        if "[mcp_servers.actors]" in text:
            raise BadInput(
                f"{path} already defines [mcp_servers.actors] (not ours); remove it first"
            )
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + TOML_BEGIN + block + TOML_END

    def remove(text: str) -> str:
        start = text.find(TOML_BEGIN)
        end = text.find(TOML_END, start)
        if start < 0 or end < 0:
            return text
        return (
            text[:start].rstrip("\n")
            + ("\n" if text[:start].strip() else "")
            + text[end + len(TOML_END) :]
        )

    return Edit(path, add, remove)


def plan(harness: str, scope: str, wake: str = "hook") -> list[Edit]:
    """The files `install` would touch for this harness and scope."""
    if harness not in HARNESSES:
        raise BadInput(f"unknown harness {harness!r}", hint=f"use one of {', '.join(HARNESSES)}")
    command = actors_command()
    shell_cmd = " ".join(command)
    home = Path.home()
    if harness == "claude-code":
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
        entry: dict[str, Any] = {
            "type": "stdio",
            "command": command[0],
            "args": [*command[1:], "mcp"],
        }
        return [
            _json_edit(mcp_file, *_mcp_entry("mcpServers", entry)),
            _json_edit(settings, *_claude_hooks(shell_cmd, wake)),
        ]
    if harness == "codex":
        if scope == "project":
            raise BadInput(
                "codex reads its MCP servers from the user config only", hint="use --user"
            )
        codex_home = Path(os.environ.get("CODEX_HOME") or home / ".codex")
        args = json.dumps([*command[1:], "mcp"])
        block = f"[mcp_servers.actors]\ncommand = {json.dumps(command[0])}\nargs = {args}\n"
        return [_toml_edit(codex_home / "config.toml", block)]
    xdg = Path(config.path(config.XDG_CONFIG_HOME))
    target = (
        Path.cwd() / "opencode.json" if scope == "project" else xdg / "opencode" / "opencode.json"
    )
    local: dict[str, Any] = {"type": "local", "command": [*command, "mcp"], "enabled": True}
    return [_json_edit(target, *_mcp_entry("mcp", local))]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _records(root: StateRoot) -> dict[str, Any]:
    data = read_json(root.installs)
    return data if isinstance(data, dict) else {}


def install(
    root: StateRoot, harness: str, scope: str, *, dry_run: bool = False, wake: str = "hook"
) -> list[dict[str, Any]]:
    if wake not in ("hook", "watcher"):
        raise BadInput(f"unknown wake {wake!r}", hint="use --wake hook or --wake watcher")
    edits = plan(harness, scope, wake)
    results = []
    staged = []
    for edit in edits:  # compute everything first: a bad file aborts before any write
        original = edit.path.read_text() if edit.path.exists() else None
        staged.append((edit, original, edit.add(original)))
    records = _records(root)
    for edit, original, new in staged:
        changed = new != (original or "")
        results.append(
            {"path": str(edit.path), "changed": changed, "content": new if dry_run else None}
        )
        if dry_run or not changed:
            continue
        backup = edit.path.with_name(edit.path.name + ".actors-backup")
        key = str(edit.path)
        if key not in records:
            if original is not None:
                write_bytes_atomic(backup, original.encode())
            records[key] = {
                "harness": harness,
                "scope": scope,
                "existed": original is not None,
                "backup": str(backup) if original is not None else None,
            }
        ensure_dir(edit.path.parent)
        write_bytes_atomic(edit.path, new.encode())
        os.chmod(edit.path, 0o600)
        records[key]["written_sha"] = _sha(new)
    if not dry_run:
        ensure_dir(root.path)
        write_json_atomic(root.installs, records)
    return results


def uninstall(root: StateRoot, harness: str, scope: str) -> list[dict[str, Any]]:
    records = _records(root)
    results = []
    for edit in plan(harness, scope):
        key = str(edit.path)
        record = records.get(key)
        current = edit.path.read_text() if edit.path.exists() else None
        if current is None:
            results.append({"path": key, "action": "absent"})
        elif record and record.get("written_sha") == _sha(current):
            if record.get("existed") and record.get("backup"):
                original = Path(record["backup"]).read_bytes()
                write_bytes_atomic(edit.path, original)
            else:
                edit.path.unlink()
            results.append({"path": key, "action": "restored"})
        else:
            cleaned = edit.remove(current)
            if cleaned != current:
                write_bytes_atomic(edit.path, cleaned.encode())
            results.append(
                {"path": key, "action": "removed entries" if cleaned != current else "unchanged"}
            )
        if record:
            if record.get("backup"):
                Path(record["backup"]).unlink(missing_ok=True)
            del records[key]
    if root.path.exists():
        write_json_atomic(root.installs, records)
    return results

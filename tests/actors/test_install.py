"""`actors install` / `uninstall` on config files that already hold other entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli

CLAUDE_MCP = {"mcpServers": {"other": {"command": "other-server", "args": ["--x"]}}}
CLAUDE_SETTINGS = {
    "permissions": {"allow": ["Bash(ls)"]},
    "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]},
}


def _write(path: Path, text: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path.read_bytes()


def test_claude_code_project_install_merges_is_idempotent_and_uninstalls_exactly(
    home: StateRoot, tmp_path: Path
) -> None:
    mcp_file, settings = tmp_path / ".mcp.json", tmp_path / ".claude" / "settings.json"
    original_mcp = _write(mcp_file, json.dumps(CLAUDE_MCP, indent=4))
    original_settings = _write(settings, json.dumps(CLAUDE_SETTINGS))
    first = cli("install", "claude-code", "--project")
    assert first.returncode == 0, first.stderr
    merged_mcp = json.loads(mcp_file.read_text())
    assert set(merged_mcp["mcpServers"]) == {"other", "actors"}
    assert merged_mcp["mcpServers"]["actors"]["args"][-1] == "mcp"
    merged = json.loads(settings.read_text())
    assert merged["permissions"]["allow"] == [
        "Bash(ls)",
        "mcp__actors__inspect",
        "mcp__actors__result",
        "mcp__actors__recipes",
        "mcp__actors__inbox_read",
    ]
    starts = merged["hooks"]["SessionStart"]
    assert starts[0] == CLAUDE_SETTINGS["hooks"]["SessionStart"][0]
    assert starts[1]["hooks"][0]["command"].endswith("hook session-start")
    (changed,) = merged["hooks"]["FileChanged"]
    assert changed["hooks"][0]["asyncRewake"] is True
    after_first = (mcp_file.read_bytes(), settings.read_bytes())
    second = cli("install", "claude-code", "--project")
    assert second.stdout.count("already installed") == 2
    assert (mcp_file.read_bytes(), settings.read_bytes()) == after_first
    undone = cli("uninstall", "claude-code", "--project")
    assert undone.returncode == 0, undone.stderr
    assert mcp_file.read_bytes() == original_mcp
    assert settings.read_bytes() == original_settings
    assert not list(tmp_path.rglob("*.actors-backup"))


def test_uninstall_after_a_user_edit_removes_only_our_entries(
    home: StateRoot, tmp_path: Path
) -> None:
    target = tmp_path / "opencode.json"
    _write(target, json.dumps({"mcp": {"mine": {"type": "local", "command": ["x"]}}}))
    assert cli("install", "opencode", "--project").returncode == 0
    data = json.loads(target.read_text())
    data["theme"] = "dark"  # the user edits the file after install
    target.write_text(json.dumps(data))
    cli("uninstall", "opencode", "--project")
    assert json.loads(target.read_text()) == {
        "mcp": {"mine": {"type": "local", "command": ["x"]}},
        "theme": "dark",
    }


def test_codex_user_install_appends_a_block_and_uninstall_restores_bytes(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    config = tmp_path / "codex" / "config.toml"
    original = _write(config, 'model = "gpt-5"\n\n[mcp_servers.other]\ncommand = "other"\n')
    assert cli("install", "codex", "--user").returncode == 0
    text = config.read_text()
    assert text.startswith(original.decode()) and "[mcp_servers.actors]" in text
    import tomllib

    parsed = tomllib.loads(text)
    assert set(parsed["mcp_servers"]) == {"other", "actors"}
    # Codex starts MCP servers with a whitelisted environment: the state root must pass
    assert {"ACTORS_HOME", "ACTORS_SESSION", "XDG_STATE_HOME"} <= set(
        parsed["mcp_servers"]["actors"]["env_vars"]
    )
    assert cli("install", "codex", "--user").stdout.endswith("already installed\n")
    cli("uninstall", "codex", "--user")
    assert config.read_bytes() == original


def test_a_fresh_install_creates_files_and_uninstall_removes_them(
    home: StateRoot, tmp_path: Path
) -> None:
    assert cli("install", "opencode", "--project").returncode == 0
    assert (tmp_path / "opencode.json").exists()
    plugin = tmp_path / ".opencode" / "plugins" / "actors-session.js"
    assert '"tool.execute.before"' in plugin.read_text()
    assert plugin.stat().st_mode & 0o777 == 0o600
    cli("uninstall", "opencode", "--project")
    assert not (tmp_path / "opencode.json").exists()
    assert not (tmp_path / ".opencode").exists()


def test_a_plugin_file_not_ours_is_refused_and_nothing_is_written(
    home: StateRoot, tmp_path: Path
) -> None:
    theirs = _write(tmp_path / ".opencode" / "plugins" / "actors-session.js", "// mine\n")
    done = cli("install", "opencode", "--project")
    assert done.returncode == 2 and "not ours" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (tmp_path / ".opencode" / "plugins" / "actors-session.js").read_bytes() == theirs
    assert not (tmp_path / "opencode.json").exists()


def test_a_plugin_an_earlier_version_wrote_is_replaced_by_the_signing_one(
    home: StateRoot, tmp_path: Path
) -> None:
    """Its claims are unsigned, which `actors mcp` now ignores: install again upgrades it."""
    from adapters.opencode.install import EARLIER_PLUGINS, PLUGIN

    written = tmp_path / ".opencode" / "plugins" / "actors-session.js"
    _write(written, EARLIER_PLUGINS[0])
    done = cli("install", "opencode", "--project")
    assert done.returncode == 0, done.stderr
    assert written.read_text() == PLUGIN and "createHmac" in PLUGIN


def test_dry_run_changes_nothing_and_bad_json_is_refused(home: StateRoot, tmp_path: Path) -> None:
    dry = cli("install", "claude-code", "--project", "--dry-run")
    assert dry.returncode == 0 and '"actors"' in dry.stdout
    assert not (tmp_path / ".mcp.json").exists()
    _write(tmp_path / ".mcp.json", "{broken")
    bad = cli("install", "claude-code", "--project")
    assert bad.returncode == 2 and "is not valid JSON" in bad.stderr
    assert (tmp_path / ".mcp.json").read_text() == "{broken"
    assert not (tmp_path / ".claude").exists()


def test_watcher_wake_installs_no_file_hook_and_tells_the_agent_to_wait(
    home: StateRoot, tmp_path: Path
) -> None:
    assert cli("install", "claude-code", "--project", "--wake", "watcher").returncode == 0
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert "FileChanged" not in settings["hooks"]
    (start,) = settings["hooks"]["SessionStart"][0]["hooks"]
    assert start["command"].endswith("hook session-start --wake watcher")
    hook_input = json.dumps({"session_id": "sess-watch", "cwd": str(tmp_path)})
    proc = cli("hook", "session-start", "--wake", "watcher", input=hook_input)
    output = json.loads(proc.stdout)["hookSpecificOutput"]
    assert "watchPaths" not in output
    assert "actors inbox wait --session sess-watch" in output["additionalContext"]
    assert cli("uninstall", "claude-code", "--project").returncode == 0
    assert not (tmp_path / ".claude" / "settings.json").exists()


def test_cross_session_inbound_is_offered_written_only_when_asked_and_taken_back(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude's messaging socket holds follow-ups for sessions that bypass permissions:
    install offers `"crossSessionInbound": "accept"` and writes it, into the user
    settings (the only place Claude takes it from), only with the flag; uninstall removes
    it while it is ours; --project and another harness refuse the flag."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = tmp_path / "claude" / "settings.json"
    _write(settings, json.dumps(CLAUDE_SETTINGS))
    plain = cli("install", "claude-code")
    assert plain.returncode == 0, plain.stderr
    assert "crossSessionInbound" not in json.loads(settings.read_text())
    assert "next: sessions that bypass permissions" in plain.stdout
    assert "--cross-session-inbound accept" in plain.stdout
    asked = cli("install", "claude-code", "--cross-session-inbound", "accept")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(settings.read_text())["crossSessionInbound"] == "accept"
    assert "next: sessions that bypass" not in asked.stdout  # nothing left to offer
    undone = cli("uninstall", "claude-code")
    assert undone.returncode == 0, undone.stderr
    assert json.loads(settings.read_text()) == CLAUDE_SETTINGS
    before = settings.read_bytes()
    for wrong, why in [
        (("claude-code", "--project"), "from user settings only"),
        (("codex",), "--cross-session-inbound accept is not for codex"),
    ]:
        refused = cli("install", *wrong, "--cross-session-inbound", "accept")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert why in refused.stderr
    assert settings.read_bytes() == before and not (tmp_path / ".claude").exists()
    bad = cli("install", "claude-code", "--cross-session-inbound", "sure")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_qwen_code_install_adds_its_stop_hook_after_theirs_and_uninstalls_exactly(
    home: StateRoot, tmp_path: Path
) -> None:
    settings = tmp_path / ".qwen" / "settings.json"
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]}}
    original = _write(settings, json.dumps({**theirs, "model": {"name": "x"}}, indent=4))
    done = cli("install", "qwen-code", "--project")
    assert done.returncode == 0, done.stderr
    assert "next: to wake an idle interactive Qwen Code" in done.stdout
    assert "--harness qwen_code" in done.stdout
    stop = json.loads(settings.read_text())["hooks"]["Stop"]
    assert stop[0] == theirs["hooks"]["Stop"][0]
    (ours,) = stop[1]["hooks"]
    assert ours["type"] == "command" and ours["command"].endswith(" hook qwen-stop")
    server = json.loads(settings.read_text())["mcpServers"]["actors"]
    assert server["args"][-1] == "mcp" and "trust" not in server  # Qwen asks, as it does
    assert (
        "settings.json (project): already installed\n"
        in cli("install", "qwen-code", "--project").stdout
    )
    assert len(json.loads(settings.read_text())["hooks"]["Stop"]) == 2
    cli("uninstall", "qwen-code", "--project")
    assert settings.read_bytes() == original


def test_copilot_install_writes_its_own_hooks_file_and_refuses_a_foreign_one(
    home: StateRoot, tmp_path: Path
) -> None:
    hooks = tmp_path / ".github" / "hooks" / "actors.json"
    mcp = tmp_path / ".github" / "mcp.json"
    theirs = {"mcpServers": {"other": {"type": "local", "command": "other", "tools": ["*"]}}}
    original = _write(mcp, json.dumps(theirs))
    done = cli("install", "copilot", "--project")
    assert done.returncode == 0, done.stderr
    written = json.loads(hooks.read_text())
    (hook,) = written["hooks"]["agentStop"]
    assert written["version"] == 1 and hook["bash"].endswith(" hook copilot-agent-stop")
    assert hooks.stat().st_mode & 0o777 == 0o600
    servers = json.loads(mcp.read_text())["mcpServers"]
    assert servers["other"] == theirs["mcpServers"]["other"]
    assert servers["actors"]["args"][-1] == "mcp" and servers["actors"]["tools"] == ["*"]
    assert cli("install", "copilot", "--project").stdout.endswith("already installed\n")
    cli("uninstall", "copilot", "--project")
    assert not hooks.exists() and mcp.read_bytes() == original
    mcp.unlink()
    # a file of that name that someone else wrote is theirs: refused, one line, exit 2
    mine = _write(hooks, json.dumps({"version": 1, "hooks": {"agentStop": [{"bash": "x"}]}}))
    refused = cli("install", "copilot", "--project")
    assert refused.returncode == 2 and "not ours" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert hooks.read_bytes() == mine and not mcp.exists()

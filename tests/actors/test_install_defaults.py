"""`actors install` with no scope flag works for every harness, writes the tool
permission and the status line into Claude Code's settings, and uninstall takes out
exactly what install added (issue 18, points 8 and 12). Real files in a temp HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import actors
from actors.install import HARNESSES
from actors.tool_models import TOOLS
from adapters.claude_code.install import QUIET_TOOLS
from runtime.store.layout import StateRoot
from tests.conftest import cli, cli_imports


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: StateRoot) -> Path:
    user = tmp_path / "home"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "PI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / ".config"))
    return user


WRITTEN = {
    "claude-code": (".claude.json", ".claude/settings.json"),
    "codex": (".codex/config.toml",),
    "opencode": (".config/opencode/opencode.json",),
    "kilo": (".config/kilo/kilo.json", ".config/kilo/plugins/actors-session.js"),
    "qwen-code": (".qwen/settings.json",),
    "copilot": (".copilot/hooks/actors.json",),
    "pi": (".pi/agent/mcp.json", ".pi/agent/extensions/actors.js"),
}


@pytest.mark.parametrize("harness", HARNESSES)
def test_install_without_a_scope_works_and_says_where_it_wrote(
    user_home: Path, harness: str
) -> None:
    done = cli("install", harness)
    assert done.returncode == 0, done.stderr
    for relative in WRITTEN[harness]:
        assert (user_home / relative).is_file()
        assert f"{user_home / relative} (user): wrote " in done.stdout
    undone = cli("uninstall", harness)
    assert undone.returncode == 0, undone.stderr
    left = [p for p in user_home.rglob("*") if p.is_file()]
    assert left == [], left


def test_codex_project_scope_is_refused_in_one_line(user_home: Path) -> None:
    done = cli("install", "codex", "--project")
    assert done.returncode == 2 and "--user" in done.stderr
    assert not (user_home / ".codex").exists()


def test_claude_code_allows_the_quiet_tools_and_uninstall_keeps_the_users_own(
    user_home: Path,
) -> None:
    assert set(QUIET_TOOLS) <= set(TOOLS) and "spawn" not in QUIET_TOOLS
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = ["Bash(ls:*)", "mcp__actors__inspect"]  # one the user allowed before install
    settings.write_text(json.dumps({"permissions": {"allow": mine}}))
    done = cli("install", "claude-code")
    assert "next: headless `claude -p`: add --allowedTools mcp__actors" in done.stdout
    allow = json.loads(settings.read_text())["permissions"]["allow"]
    assert allow == [
        *mine,
        "mcp__actors__result",
        "mcp__actors__recipes",
        "mcp__actors__inbox_read",
    ]
    assert cli("install", "claude-code").stdout.count("already installed") == 2
    edited = json.loads(settings.read_text())
    edited["theme"] = "dark"  # the user edits the file since: no byte restore possible
    settings.write_text(json.dumps(edited))
    assert cli("uninstall", "claude-code").returncode == 0
    assert json.loads(settings.read_text()) == {"permissions": {"allow": mine}, "theme": "dark"}


THEIRS = {"type": "command", "command": 'printf "%s" "mine:$(head -c 15)"', "padding": 2}


def _status_line(settings: Path, session: str) -> str:
    """Run the configured status line as Claude Code does: a shell, the JSON on stdin."""
    command = json.loads(settings.read_text())["statusLine"]["command"]
    data = json.dumps({"session_id": session, "model": {"display_name": "m"}})
    done = subprocess.run(
        ["/bin/sh", "-c", command], input=data, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("edited_since", [False, True])
def test_the_status_line_composes_with_the_users_and_uninstall_restores_it(
    user_home: Path, edited_since: bool
) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"statusLine": THEIRS}, indent=1))
    original = settings.read_bytes()
    assert cli("install", "claude-code").returncode == 0
    line = json.loads(settings.read_text())["statusLine"]
    assert line["padding"] == 2 and " status --line --stdin --then " in line["command"]
    record = actors.spawn(template="sleep 30", session="cc-1")
    try:
        ours = _status_line(settings, "cc-1")
        assert ours.startswith('mine:{"session_id":') and ours.rstrip().endswith("▶"), ours
        assert _status_line(settings, "cc-other") == 'mine:{"session_id": \n'  # not its runs
    finally:
        actors.kill(record["run"], session="cc-1")
    if edited_since:
        data = json.loads(settings.read_text())
        settings.write_text(json.dumps({**data, "theme": "dark"}))
    assert cli("uninstall", "claude-code").returncode == 0
    if edited_since:
        assert json.loads(settings.read_text()) == {"statusLine": THEIRS, "theme": "dark"}
    else:
        assert settings.read_bytes() == original


def test_without_a_status_line_ours_is_alone_and_refreshes(user_home: Path) -> None:
    assert cli("install", "claude-code").returncode == 0
    settings = user_home / ".claude" / "settings.json"
    line = json.loads(settings.read_text())["statusLine"]
    assert line["type"] == "command" and line["refreshInterval"] >= 1
    assert line["command"].endswith(" status --line --stdin")
    assert _status_line(settings, "cc-idle") == ""  # nothing running: nothing shown
    data = json.loads(settings.read_text())
    settings.write_text(json.dumps({**data, "theme": "dark"}))
    assert cli("uninstall", "claude-code").returncode == 0
    assert json.loads(settings.read_text()) == {"theme": "dark"}


CLAUDE = Path(__file__).resolve().parents[2] / ".peers" / "node_modules" / ".bin" / "claude"


@pytest.mark.skipif(not CLAUDE.exists(), reason="the real claude is installed by `make peers`")
def test_the_real_claude_loads_the_installed_user_config(user_home: Path) -> None:
    """The settings install writes (statusLine, permissions, hooks) do not stop the real
    Claude Code from loading the user config: its MCP server connects."""
    assert cli("install", "claude-code").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(
        ANTHROPIC_API_KEY="sk-ant-dummy-offline",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        PATH=os.pathsep.join([str(Path(shutil.which("python") or "").parent), env["PATH"]]),
    )
    done = subprocess.run(
        [str(CLAUDE), "mcp", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "actors:" in done.stdout and "Connected" in done.stdout, done.stdout + done.stderr


def test_the_status_line_stays_on_the_fast_path(home: StateRoot) -> None:
    """Claude Code runs it on every update: parsed by hand, no click, nothing heavy."""
    from tests.actors.test_import_budget import HEAVY

    argv = ["status", "--line", "--stdin", "--then", "echo theirs"]
    loaded, out = cli_imports(argv, top_level=True, stdin='{"session_id": "s1"}')
    assert out.stdout.startswith("theirs\nLOADED"), out.stdout + out.stderr
    assert not loaded & {"click", *HEAVY}, sorted(loaded & {"click", *HEAVY})

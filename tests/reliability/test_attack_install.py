"""Issue 17 #12: install / uninstall touch only what they own.

`actors install claude-code --user` chmods $HOME to 0700 (with --project: the project
directory, dropping its setgid bit), rewrites config files 0644 as 0600, replaces a
symlinked ~/.claude/settings.json by a plain file, and uninstall restores none of it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: StateRoot) -> Path:
    user = tmp_path / "home"
    user.mkdir()
    os.chmod(user, 0o755)
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / ".config"))
    return user


def _install(*args: str) -> None:
    proc = cli("install", *args)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.xfail(
    reason="issue 17 #12: install --user chmods $HOME (and the harness's directories) it does not own",
    strict=True,
)
@pytest.mark.parametrize("harness", ["claude-code"])
def test_install_user_leaves_home_mode_alone(user_home: Path, harness: str) -> None:
    (user_home / ".config").mkdir(mode=0o755)
    os.chmod(user_home / ".config", 0o755)
    before = {p: _mode(p) for p in (user_home, user_home / ".config")}
    _install(harness, "--user")
    after = {p: _mode(p) for p in before}
    assert after == before, f"modes changed: {before} -> {after}"


@pytest.mark.xfail(
    reason="issue 17 #12: install --project chmods the project directory and drops its setgid bit",
    strict=True,
)
@pytest.mark.parametrize("harness", ["claude-code", "opencode"])
def test_install_project_leaves_the_project_directory_alone(
    user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, harness: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.chmod(project, 0o2775)
    monkeypatch.chdir(project)
    _install(harness, "--project")
    assert oct(_mode(project)) == oct(0o2775)


@pytest.mark.xfail(
    reason="issue 17 #12: install rewrites a 0644 config file as 0600",
    strict=True,
)
@pytest.mark.parametrize("name", [".claude.json", ".claude/settings.json"])
def test_install_keeps_the_mode_of_an_existing_config_file(user_home: Path, name: str) -> None:
    path = user_home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"theme": "dark"}))
    os.chmod(path, 0o644)
    _install("claude-code", "--user")
    assert json.loads(path.read_text()).get("theme") == "dark"
    assert oct(_mode(path)) == oct(0o644)


@pytest.mark.xfail(
    reason="issue 17 #12: install replaces a symlinked ~/.claude/settings.json by a plain file",
    strict=True,
)
@pytest.mark.parametrize("name", [".claude/settings.json", ".claude.json"])
def test_install_edits_a_symlinked_config_through_without_replacing_the_link(
    user_home: Path, tmp_path: Path, name: str
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-config.json"
    real.write_text(json.dumps({"theme": "dark"}))
    link = user_home / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)
    _install("claude-code", "--user")
    assert link.is_symlink(), "the user's symlink was replaced by a plain file"


@pytest.mark.xfail(
    reason="issue 17 #12: uninstall restores neither $HOME's mode, a file's mode nor a symlink",
    strict=True,
)
def test_uninstall_restores_everything_install_changed(user_home: Path, tmp_path: Path) -> None:
    claude = user_home / ".claude"
    claude.mkdir()
    os.chmod(claude, 0o755)
    real = tmp_path / "settings-real.json"
    real.write_text(json.dumps({"theme": "dark"}))
    (claude / "settings.json").symlink_to(real)
    config = user_home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 3}))
    os.chmod(config, 0o644)
    before = {
        "home": _mode(user_home),
        "claude": _mode(claude),
        "config": (_mode(config), config.read_bytes()),
        "settings_link": (claude / "settings.json").is_symlink(),
        "real": real.read_bytes(),
    }
    _install("claude-code", "--user")
    proc = cli("uninstall", "claude-code", "--user")
    assert proc.returncode == 0, proc.stderr
    after = {
        "home": _mode(user_home),
        "claude": _mode(claude),
        "config": (_mode(config), config.read_bytes()),
        "settings_link": (claude / "settings.json").is_symlink(),
        "real": real.read_bytes(),
    }
    assert after == before

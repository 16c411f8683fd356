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


@pytest.mark.parametrize("harness", ["claude-code"])
def test_install_user_leaves_home_mode_alone(user_home: Path, harness: str) -> None:
    (user_home / ".config").mkdir(mode=0o755)
    os.chmod(user_home / ".config", 0o755)
    before = {p: _mode(p) for p in (user_home, user_home / ".config")}
    _install(harness, "--user")
    after = {p: _mode(p) for p in before}
    assert after == before, f"modes changed: {before} -> {after}"


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


@pytest.mark.parametrize("name", [".claude.json", ".claude/settings.json"])
def test_install_keeps_the_mode_of_an_existing_config_file(user_home: Path, name: str) -> None:
    path = user_home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"theme": "dark"}))
    os.chmod(path, 0o644)
    _install("claude-code", "--user")
    assert json.loads(path.read_text()).get("theme") == "dark"
    assert oct(_mode(path)) == oct(0o644)


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


# -- siblings: every harness, every kind of file install may meet --------------------------------


def _refused(*args: str) -> str:
    proc = cli(*args, timeout=30)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("actors: "), (
        proc.returncode,
        proc.stderr,
    )
    return lines[0]


def _snapshot(*roots: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))]:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                out[str(path)] = (_mode(path), path.read_bytes())
            else:
                out[str(path)] = (stat.S_IFMT(st.st_mode), _mode(path))
    return out


@pytest.mark.parametrize(
    ("harness", "config"),
    [("codex", ".codex/config.toml"), ("opencode", ".config/opencode/opencode.json")],
)
def test_other_harnesses_keep_modes_of_what_they_did_not_create(
    user_home: Path, harness: str, config: str
) -> None:
    path = user_home / config
    path.parent.mkdir(parents=True)
    for directory in (user_home, *path.relative_to(user_home).parents):
        os.chmod(user_home / directory, 0o755)
    path.write_text("" if harness == "codex" else "{}")
    os.chmod(path, 0o640)
    dirs = {d: _mode(user_home / d) for d in (".", *map(str, path.relative_to(user_home).parents))}
    _install(harness, "--user")
    assert "actors" in path.read_text()
    assert oct(_mode(path)) == oct(0o640)
    assert {d: _mode(user_home / d) for d in dirs} == dirs
    assert cli("uninstall", harness, "--user").returncode == 0
    assert oct(_mode(path)) == oct(0o640) and "actors" not in path.read_text()


def test_directories_install_created_are_0700_and_uninstall_removes_them(user_home: Path) -> None:
    (user_home / ".config").mkdir()
    os.chmod(user_home / ".config", 0o755)
    _install("opencode", "--user")
    created = user_home / ".config" / "opencode"
    assert oct(_mode(created)) == oct(0o700)
    assert oct(_mode(created / "opencode.json")) == oct(0o600)
    assert cli("uninstall", "opencode", "--user").returncode == 0
    assert not created.exists()
    assert oct(_mode(user_home / ".config")) == oct(0o755)


def test_a_symlinked_config_directory_is_used_through_its_link(
    user_home: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    os.chmod(dotfiles, 0o755)
    (dotfiles / "settings.json").write_text(json.dumps({"theme": "dark"}))
    os.chmod(dotfiles / "settings.json", 0o644)
    (user_home / ".claude").symlink_to(dotfiles)
    before = _snapshot(user_home, dotfiles)
    _install("claude-code", "--user")
    assert (user_home / ".claude").is_symlink()
    settings = json.loads((dotfiles / "settings.json").read_text())
    assert settings["theme"] == "dark" and "SessionStart" in settings["hooks"]
    assert oct(_mode(dotfiles / "settings.json")) == oct(0o644)
    assert oct(_mode(dotfiles)) == oct(0o755)
    assert cli("uninstall", "claude-code", "--user").returncode == 0
    assert _snapshot(user_home, dotfiles) == before


def test_a_read_only_config_file_stays_read_only(user_home: Path) -> None:
    config = user_home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 1}))
    os.chmod(config, 0o444)
    _install("claude-code", "--user")
    assert oct(_mode(config)) == oct(0o444)
    assert "actors" in json.loads(config.read_text())["mcpServers"]


def test_uninstall_of_an_edited_file_keeps_its_current_mode(user_home: Path) -> None:
    config = user_home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 1}))
    os.chmod(config, 0o644)
    _install("claude-code", "--user")
    data = json.loads(config.read_text())
    data["numStartups"] = 2  # Claude Code edits its file after the install
    config.write_text(json.dumps(data))
    os.chmod(config, 0o640)
    assert cli("uninstall", "claude-code", "--user").returncode == 0
    assert json.loads(config.read_text()) == {"numStartups": 2}
    assert oct(_mode(config)) == oct(0o640)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _latin1(path: Path) -> None:
    path.write_bytes(b'{"name": "caf\xe9"}')


def _dangling(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere.json")


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (_fifo, "not a regular file"),
        (_directory, "not a regular file"),
        (_latin1, "not UTF-8"),
        (_dangling, "does not exist"),
    ],
    ids=["fifo", "directory", "not-utf8", "dangling-link"],
)
@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_a_config_that_cannot_be_edited_is_refused_in_one_line_and_nothing_changes(
    user_home: Path, home: StateRoot, make: object, needle: str, verb: str
) -> None:
    assert callable(make)
    make(user_home / ".claude.json")
    before = _snapshot(user_home)
    line = _refused(verb, "claude-code", "--user")
    assert needle in line and ".claude.json" in line, line
    assert _snapshot(user_home) == before
    assert not home.installs.exists()


def test_a_write_that_fails_takes_back_the_files_already_written(
    user_home: Path, home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    mcp = project / ".mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    os.chmod(mcp, 0o644)
    # .claude/settings.json lands in /proc, where not even root can create a file
    (project / ".claude").symlink_to("/proc/self")
    monkeypatch.chdir(project)
    before = _snapshot(project)
    line = _refused("install", "claude-code", "--project")
    assert "cannot write" in line and "nothing was changed" in line, line
    assert _snapshot(project) == before
    assert not home.installs.exists()

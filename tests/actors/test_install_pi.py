"""`actors install pi`: pi's mcp.json entry and the actors pi extension, user scope by
default ($PI_CODING_AGENT_DIR, else ~/.pi/agent), merged, idempotent, undone exactly;
a file that is not ours is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.pi.install import HEADER, extension_text
from runtime.store.layout import StateRoot
from tests.conftest import cli

OTHER = {"mcpServers": {"docs": {"url": "https://example.com/mcp"}}, "autoEnableCodemode": False}


@pytest.fixture
def agent(home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(where))
    return where


def test_user_install_merges_is_idempotent_and_uninstalls_exactly(agent: Path) -> None:
    mcp = agent / "mcp.json"
    agent.mkdir()
    mcp.write_text(json.dumps(OTHER, indent=4))
    original = mcp.read_bytes()
    done = cli("install", "pi")
    assert done.returncode == 0, done.stderr
    merged = json.loads(mcp.read_text())
    assert merged["autoEnableCodemode"] is False and set(merged["mcpServers"]) == {"docs", "actors"}
    ours = merged["mcpServers"]["actors"]
    assert ours["args"][-1] == "mcp" and ours["exposure"] == "direct"
    extension = agent / "extensions" / "actors.js"
    assert extension.read_text().startswith(HEADER)
    assert extension.stat().st_mode & 0o777 == 0o600
    assert "next: restart pi" in done.stdout
    written = (mcp.read_bytes(), extension.read_bytes())
    again = cli("install", "pi")
    assert again.stdout.count("already installed") == 2, again.stdout
    assert (mcp.read_bytes(), extension.read_bytes()) == written
    undone = cli("uninstall", "pi")
    assert undone.returncode == 0, undone.stderr
    assert mcp.read_bytes() == original and not extension.exists()
    assert not (agent / "extensions").exists()


def test_an_extension_that_is_not_ours_is_refused_and_nothing_written(agent: Path) -> None:
    theirs = agent / "extensions" / "actors.js"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("export default function (pi) {}\n")
    done = cli("install", "pi")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is not ours" in done.stderr
    assert theirs.read_text() == "export default function (pi) {}\n"
    assert not (agent / "mcp.json").exists()


def test_an_earlier_installs_extension_is_ours_and_replaced(agent: Path) -> None:
    earlier = agent / "extensions" / "actors.js"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(extension_text(["/old/venv/bin/actors"]))
    assert cli("install", "pi").returncode == 0
    assert "/old/venv/bin/actors" not in earlier.read_text()


def test_a_dangling_symlinked_config_is_refused(agent: Path, tmp_path: Path) -> None:
    agent.mkdir()
    (agent / "mcp.json").symlink_to(tmp_path / "nowhere.json")
    done = cli("install", "pi")
    assert done.returncode == 2 and "does not exist" in done.stderr
    assert not (tmp_path / "nowhere.json").exists()
    assert not (agent / "extensions").exists()


def test_project_install_says_pi_gates_it_behind_trust(home: StateRoot, tmp_path: Path) -> None:
    done = cli("install", "pi", "--project")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".pi" / "mcp.json").is_file()
    assert (tmp_path / ".pi" / "extensions" / "actors.js").is_file()
    assert "trusted project" in done.stdout


def test_the_actors_command_is_one_json_value_in_the_extension() -> None:
    """A path with quotes, backticks or `${...}` stays one string literal in the JS."""
    hostile = '/tmp/a"b`${process.exit(1)}`\\c\n'
    text = extension_text([hostile, "-m", "actors"])
    line = next(x for x in text.splitlines() if x.startswith("const ACTORS = "))
    assert json.loads(line.removeprefix("const ACTORS = ")) == [hostile, "-m", "actors"]

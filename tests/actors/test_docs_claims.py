"""The docs' lists of things the code has (recipes, adapters, hooks) match the code, and
the docs stay self-contained: a reader has only this repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.delivery.registry import BUILTIN
from tests.conftest import REPO, cli

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def section(path: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    text = path.read_text()
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n") + len(heading)
    rest = text[start:]
    stop = re.search(rf"^#{{1,{len(level)}}} ", rest, re.M)
    return rest[: stop.start()] if stop else rest


def test_readme_lists_every_shipped_recipe() -> None:
    layout = section(REPO / "README.md", "## Layout")
    listed = re.search(r"recipes/\s+shipped recipes: (.*?) \(and", layout, re.S)
    assert listed, layout
    names = sorted(n.strip() for n in re.split(r",\s*", listed.group(1)))
    assert names == sorted(p.stem for p in (REPO / "recipes").glob("*.json"))


def test_readme_names_every_built_in_adapter() -> None:
    text = (REPO / "README.md").read_text()
    bullet = re.split(r"See\s+\[", text[text.index("surfaced by the session's adapter") :])[0]
    named = set(re.findall(r"`([a-z_]+)`", bullet))
    assert named == set(BUILTIN), sorted(named ^ set(BUILTIN))


@pytest.mark.parametrize(
    ("doc", "heading"),
    [("cli.md", "## session"), ("delivery.md", "## Third-party adapters")],
)
def test_docs_list_every_built_in_adapter(doc: str, heading: str) -> None:
    text = section(REPO / "docs" / doc, heading)
    missing = [name for name in BUILTIN if f"`{name}`" not in text]
    assert missing == [], f"{doc} {heading} does not name {missing}"


def test_adapters_md_has_a_section_per_built_in_adapter() -> None:
    headings = re.findall(r"^## (\w+) \(", (REPO / "docs" / "adapters.md").read_text(), re.M)
    assert sorted(headings) == sorted(BUILTIN)


def test_harness_help_lists_every_built_in_adapter(home: object) -> None:
    out = cli("session", "register", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    missing = [name for name in BUILTIN if name not in text]
    assert missing == [], out.stdout


def test_cli_md_names_every_hook_install_writes(home: object, tmp_path: Path) -> None:
    """`install claude-code --dry-run`: each hook event and command it would write is in
    cli.md's install section and in harnesses.md."""
    out = cli("install", "claude-code", "--dry-run", env={"HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    settings = out.stdout.split(".claude/settings.json (would change)\n", 1)[1]
    hooks = json.loads(settings[: settings.index("\n}\n") + 3])["hooks"]
    install = section(REPO / "docs" / "cli.md", "## install, uninstall")
    harnesses = (REPO / "docs" / "harnesses.md").read_text()
    assert len(hooks) == 5
    for event, groups in hooks.items():
        command = groups[0]["hooks"][0]["command"].split(" hook ", 1)[1]
        assert f"`{event}`" in install and f"hook {command}" in install, (event, command)
        assert f"hook {command}" in harnesses, command


OUTSIDE = [
    r"\bseeds?\b",
    r"\bthe reference\b",
    r"\breference (matrix|machine|documents?)\b",
    r"\bissue \d+",
    r"\bbenchmark issue\b",
    r"DESIGN\.md",
    r"\.\./shared",
    r"/work/",
    r"§",
    r"harness-delivery\.md",
]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_refer_only_to_what_the_repository_has(path: Path) -> None:
    found = [
        f"{path.name}:{number}: {line.strip()[:100]}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for pattern in OUTSIDE
        if re.search(pattern, line, re.I)
    ]
    assert found == []


def test_readme_python_api_line_runs(home: object) -> None:
    """README's one-line Python API example, run as written: the run ends `done`."""
    text = (REPO / "README.md").read_text()
    snippet = re.search(r"`(import actors; [^`]+)`", text)
    assert snippet, "README lost its Python API example"
    code = snippet.group(1) + '\nprint(actors.wait(r["run"])["status"])'
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["done"]

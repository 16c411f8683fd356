"""The layout's rules, held by tests: layers point downward, no module imports itself back
through others, and functions stay small enough to read. A module has no line budget: it
is one concept, and a concept is never split to fit a size (the project's style rule; a
400-line cap here once pushed helpers to put a file's path outside the layout module).

The import graph is built by grimp (import-linter's engine) from the source. It counts
imports made inside functions as well: a function-level import may save start-up time,
but if it closed a cycle, the cycle test below would name it.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "runtime", "adapters", "recipes")
MAX_FUNCTION_LINES = 80


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def test_layer_contract_holds() -> None:
    """`lint-imports` checks the `layers` contract of pyproject.toml (also run by
    `make check`): an upward import anywhere fails here with the offending line."""
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert linter is not None, "import-linter is a test dependency (pip install -e '.[test]')"
    proc = subprocess.run(
        [linter, "--no-cache", "--no-logo"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the groups of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_no_import_cycles_between_modules() -> None:
    """No module reaches itself again through its imports, function-level ones included.

    A package's `__init__` is left out: it re-exports its modules lazily (by name, on
    first use), which is not a dependency of theirs on it.
    """
    built = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    packages = {m for m in built.modules if (REPO / m.replace(".", "/") / "__init__.py").exists()}
    graph = {
        module: {m for m in built.find_modules_directly_imported_by(module) if m not in packages}
        for module in built.modules
        if module not in packages
    }
    assert _strongly_connected(graph) == []


def _function_lengths(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            found.append((f"{node.name} (line {node.lineno})", node.end_lineno - node.lineno + 1))
    return found


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_functions_stay_readable(path: Path) -> None:
    long = [(name, n) for name, n in _function_lengths(path) if n > MAX_FUNCTION_LINES]
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_architecture_doc_lists_every_module() -> None:
    """docs/architecture.md is the layout's truth: a new module is named there
    (`python scripts/architecture_modules.py` rewrites the table)."""
    listed = (REPO / "docs" / "architecture.md").read_text()
    missing = [
        str(path.relative_to(REPO))
        for package in ("actors", "adapters", "runtime")
        for path in sorted((REPO / package).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and f"`{path.relative_to(REPO)}`" not in listed
    ]
    assert missing == []


def test_nothing_installed_or_generated_is_tracked() -> None:
    """The harness install (.peers), the venv and caches are never in git: a tracked
    `.peers` link once replaced the npm install on checkout (git deletes ignored files in
    its way) and would make `make peers` fail on a fresh clone."""
    import subprocess

    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    local = (".peers", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "build", "dist")
    found = [
        name.decode()
        for name in tracked
        if name and (name.split(b"/")[0].decode() in local or b"__pycache__" in name)
    ]
    assert found == [], found


def test_shipped_recipe_scripts_stand_on_their_own() -> None:
    """`recipes` sits below the runtime (the library finds the shipped recipes through it),
    so a script a shipped recipe runs imports none of actors, runtime or adapters: it
    talks to actors through its CLI. A program that needs the Python API (the lease
    service) is a module of `actors` and a recipe runs it with `python3 -P -m`."""
    ours = {"actors", "runtime", "adapters"}
    found = []
    for path in sorted((REPO / "recipes" / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ours]
    assert found == []


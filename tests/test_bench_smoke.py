"""`make bench QUICK=1` keeps running clean on a fresh clone (issue 31): every import a
benchmark makes resolves (they are made lazily, inside functions, so nothing else would
notice a moved module), and the quick CLI and spawn benchmarks end 0 with only figures
on their output: no traceback, no advice written for a person or an agent, no negative
figure. Speed itself is measured in bench/, never asserted here."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = sorted((REPO / "bench").glob("*.py"))


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.stem)
def test_every_import_a_benchmark_makes_resolves(path: Path) -> None:
    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, attr in names:
            try:
                found = importlib.import_module(module)
            except ImportError as exc:
                missing.append(f"{module}: {exc}")
                continue
            if attr is not None and not hasattr(found, attr):
                try:
                    importlib.import_module(f"{module}.{attr}")
                except ImportError:
                    missing.append(f"from {module} import {attr}")
    assert missing == [], missing


FIGURE = re.compile(r"(?:median|p99|max)\s+(-?\d+(?:\.\d+)?)")


def test_the_quick_cli_and_spawn_benchmarks_run_clean(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "cli", "spawn"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    for noise in ("Traceback", "Ask the operator", "export ACTORS_SESSION", "actors:"):
        assert noise not in text, text
    rows = [line for line in out.stdout.splitlines() if FIGURE.search(line)]
    assert any(line.startswith("actors emit (CLI, inside a run)") for line in rows), out.stdout
    negative = [line for line in rows if any(float(v) < 0 for v in FIGURE.findall(line))]
    assert negative == [], negative

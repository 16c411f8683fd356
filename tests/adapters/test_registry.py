"""The adapter registry: built-ins are declared as entry points like third-party
adapters, BUILTIN mirrors them (the fast path), and a miss goes to importlib.metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from runtime.delivery.registry import BUILTIN, adapter_class
from tests.conftest import REPO


def test_builtin_is_exactly_the_declared_entry_points() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"]["actors.adapters"]
    assert declared == BUILTIN


def test_every_builtin_resolves_to_an_adapter_class() -> None:
    for harness in BUILTIN:
        cls = adapter_class(harness)
        assert cls.capabilities.level.startswith("D"), harness
        assert callable(cls.check_options) and callable(cls.receive_message), harness


def test_a_third_party_adapter_is_found_through_its_entry_point(tmp_path: Path) -> None:
    """A real installed distribution (a dist-info on sys.path), not a patched lookup."""
    (tmp_path / "echo_adapter.py").write_text(
        "from adapters.file import FileAdapter\n\nclass EchoAdapter(FileAdapter):\n    pass\n"
    )
    info = tmp_path / "actors_echo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: actors-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[actors.adapters]\necho = echo_adapter:EchoAdapter\n")
    probe = (
        "import json\n"
        "from runtime.delivery.registry import adapter_class, known_harnesses\n"
        "cls = adapter_class('echo')\n"
        "print(json.dumps([cls.__module__, cls.__name__, 'echo' in known_harnesses()]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout) == ["echo_adapter", "EchoAdapter", True]


def test_a_builtin_is_found_without_reading_entry_points() -> None:
    probe = (
        "import sys\n"
        "from runtime.delivery.registry import BUILTIN, adapter_class\n"
        "for harness in BUILTIN: adapter_class(harness)\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "False"

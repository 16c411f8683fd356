"""The adapter registry: built-ins are declared as entry points like third-party
adapters, BUILTIN mirrors them (the fast path), and a miss goes to importlib.metadata.
Every class it hands out is a `contract.Adapter`: the built-ins derive from AdapterBase
(so mypy holds them to the Protocol), and a third-party class written to the older,
duck-typed contract gets AdapterBase's defaults for the parts it leaves out."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

import actors
from runtime.delivery.contract import Adapter, AdapterBase
from runtime.delivery.registry import BUILTIN, adapter_class
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests._levels import LEVEL_LINE
from tests.conftest import REPO, cli, finished

PARTS = ("receive_message", "check_options", "pin_options", "check_reachable", "judge_probe")
"""The Protocol's methods: what registration, the engine and the doctor call."""


def install_adapter(site: Path, harness: str, module: str, source: str) -> dict[str, str]:
    """A real installed distribution: `module.py` and a dist-info declaring it under
    `actors.adapters` in `site`; returns the environment that puts `site` on sys.path."""
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"actors_{harness}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: actors-{harness}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[actors.adapters]\n{harness} = {module}:{harness.title()}Adapter\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}


def test_builtin_is_exactly_the_declared_entry_points() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"]["actors.adapters"]
    assert declared == BUILTIN


def test_every_entry_point_adapter_satisfies_the_protocol() -> None:
    """Each declared adapter derives from AdapterBase (mypy then proves it conforms), is
    an `Adapter` at run time, and takes each part as the Protocol names its parameters."""
    declared = {ep.name for ep in entry_points(group="actors.adapters")}
    assert set(BUILTIN) <= declared
    for harness in sorted(BUILTIN):
        cls = adapter_class(harness)
        assert issubclass(cls, AdapterBase), harness
        assert isinstance(cls.__new__(cls), Adapter), harness
        assert cls.capabilities.level.startswith("D"), harness
        assert cls.OPTIONS is not None, f"{harness}: a built-in declares its options"
        for part in PARTS:
            ours = inspect.signature(getattr(cls, part)).parameters
            theirs = inspect.signature(getattr(Adapter, part)).parameters
            assert list(ours) == list(theirs), (harness, part)


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


MINIMAL = """
    from pathlib import Path

    from runtime.delivery.contract import Receipt


    class MinimalAdapter:
        def receive_message(self, envelope, context):
            with Path(self.options["out"]).open("a") as out:
                out.write(f"{context.delivery_id} {envelope['type']}\\n")
            return Receipt("delivered", context.delivery_id, observed=["triggered"])
"""


def test_a_minimal_third_party_adapter_registers_and_delivers(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The older, duck-typed contract at its smallest: no base class, no `capabilities`,
    no `OPTIONS`, no `__init__`, only `receive_message`. Registration leaves its keys
    unchecked (documented), a run's follow-up reaches it from the real runner process,
    and `actors doctor delivery` judges it by the plain judgement."""
    env = install_adapter(tmp_path / "site", "minimal", "minimal_adapter", MINIMAL)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])  # the runner inherits it
    out = tmp_path / "delivered.txt"
    proc = cli("session", "register", "--harness", "minimal", "--id", "mini", "-o", f"out={out}")
    assert proc.returncode == 0, proc.stderr
    session = json.loads(session_paths(home, "mini").record.read_text())
    assert session["options"] == {"out": str(out)}
    assert session["capabilities"]["level"] == "D3"  # AdapterBase's: the durable inbox

    record = actors.spawn("hello", session="mini")
    assert finished(record)["status"] == "done"
    lines = out.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" run.done"), lines
    journal = read_jsonl(session_paths(home, "mini").deliveries).records
    assert [(r["harness"], r["state"]) for r in journal if r.get("event") == "delivered"] == [
        ("minimal", "delivered")
    ]

    proc = cli("doctor", "delivery", "--session", "mini")
    assert proc.returncode == 0, proc.stderr
    verdicts = {found.group(1): found.group(3) for found in LEVEL_LINE.finditer(proc.stdout)}
    assert verdicts["D2"] == verdicts["D3"] == "pass", proc.stdout
    assert "transport=not declared" in proc.stdout and "declared_level=D3" in proc.stdout
    assert len(out.read_text().splitlines()) == 2  # the probe went through it too


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class BrokenAdapter:\n    pass\n", "is not an adapter: it has no receive_message"),
        ("BrokenAdapter = 42\n", "is not a class"),
        ("import no_such_module_here\n", "does not load: ModuleNotFoundError"),
        ("x = 1\n", "does not load: AttributeError"),
        ("def broken(:\n", "does not load: SyntaxError"),
        ("raise RuntimeError('at\\nimport')\n", "does not load: RuntimeError: at import"),
        (
            "class Meta(type):\n    pass\n\nclass BrokenAdapter(metaclass=Meta):\n    pass\n",
            "cannot take AdapterBase's defaults (TypeError: metaclass conflict",
        ),
    ],
)
def test_a_third_party_entry_point_that_is_no_adapter_is_refused_at_registration(
    home: StateRoot, tmp_path: Path, source: str, expected: str
) -> None:
    """One line naming the entry point and what is wrong, exit 2, nothing written."""
    env = install_adapter(tmp_path / "site", "broken", "broken_adapter", source)
    proc = cli("session", "register", "--harness", "broken", "--id", "b", env=env)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr and "broken_adapter:BrokenAdapter" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not home.sessions.exists()

"""The peers tier: real harnesses (installed by `make peers`) against the fake model.

Every harness runs in throw-away HOME / config directories with its network features
off and its model provider pointed at the fake LLM on 127.0.0.1. When the harnesses are
not installed the tests skip with a clear reason, unless ACTORS_REQUIRE_PEERS=1 (CI),
where a missing harness is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PEERS
from tests.peers.fake_llm import FakeLLM

PEERS_BIN = PEERS / "node_modules" / ".bin"
PINS = ("", "previous")
"""The newest pin (peers/package.json) and the one before it (peers/previous: Claude Code,
Codex and pi under its old name): the doctor tests and those of a surface that changed
run on both, so docs/adapters.md's level table has a row per harness and version."""
PIN_IDS = ("current", "previous")
_skipped: list[str] = []


def peer_bin(name: str, pin: str = "") -> Path:
    """The installed harness executable, or skip (fail under ACTORS_REQUIRE_PEERS=1).
    `pin` names a second, older pin (peers/<pin>/package.json, installed by `make peers`
    into .peers/<pin>/) for the few tests that check a surface on both versions."""
    where = (PEERS / pin / "node_modules" / ".bin") if pin else PEERS_BIN
    path = where / name
    if path.exists():
        return path
    why = f"peer {name!r} is not installed in {where}: run `make peers`"
    if os.environ.get("ACTORS_REQUIRE_PEERS") == "1":
        pytest.fail(why + " (ACTORS_REQUIRE_PEERS=1: a skipped peer test is a failure)")
    _skipped.append(name)
    pytest.skip(why)


def actors_install(harness: str, env: dict[str, str], cwd: Path, *args: str) -> str:
    """The real `actors install HARNESS --user [ARGS]`, as the docs tell a user to run it,
    into the throw-away config the harness under test reads (from `env`); its output."""
    import subprocess
    import sys

    done = subprocess.run(
        [str(Path(sys.executable).parent / "actors"), "install", harness, "--user", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"actors install {harness} failed: {done.stderr or done.stdout}")
    return done.stdout


MORE = "more"
"""The pin dir of the harnesses added after the first five (peers/more/, installed into
.peers/more/: Kilo Code, Qwen Code, GitHub Copilot CLI)."""


def peer_version(name: str, pin: str = "") -> str:
    """The installed version of harness `name` at `pin`: the package.json of the package
    whose executable it is (pi changed its package name, so the name is not fixed)."""
    import json

    start = peer_bin(name, pin).resolve()
    for folder in start.parents:
        manifest = folder / "package.json"
        if manifest.exists():
            return str(json.loads(manifest.read_text())["version"])
    raise RuntimeError(f"no package.json above {start}")


def doctor_verdicts(stdout: str, peer: str, pin: str = "", setup: str = "") -> dict[str, str]:
    """`actors doctor delivery`'s verdicts by level (`{"D3": "pass", ...}`) for a session
    of the real harness `peer` (at pin `pin`), recorded for docs/adapters.md's level table
    (tests/_levels.py)."""
    from tests._levels import observed

    return observed(stdout, version=f"{peer} {peer_version(peer, pin)}", setup=setup, pin=pin)


def register_session(harness: str, ident: str = "coord", *flags: str, **options: str) -> None:
    """`actors session register` through the real CLI (exit 0 asserted); `flags` such as
    --no-check go before the options."""
    from tests.conftest import cli

    args = [item for key, value in options.items() for item in ("-o", f"{key}={value}")]
    done = cli("session", "register", "--harness", harness, "--id", ident, *flags, *args)
    assert done.returncode == 0, done.stderr


def followup(token: str) -> dict[str, Any]:
    """A run.done follow-up whose summary carries `token` (which the fake model echoes)."""
    return {
        "id": f"env-{token}",
        "type": "run.done",
        "from": "run:peer",
        "to": "coordinator",
        "summary": f"Run peer done {token}",
        "body": {"token": token},
    }


@pytest.fixture
def fake_llm(tmp_path: Path) -> Iterator[FakeLLM]:
    llm = FakeLLM(log=tmp_path / "llm-requests.jsonl")
    llm.start()
    yield llm
    llm.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/peers/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.peers)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"peers tier SKIPPED ({len(_skipped)} tests): harnesses not installed;"
            " run `make peers` to install them (CI requires them)",
            yellow=True,
        )

"""The installed harnesses are the pinned ones, and the Node on PATH runs them.

A re-pin changes peers/*package.json; a .peers/ that `make peers` has not refreshed since
would run the whole tier against the old versions without a word (and pi 1.x dies at
start-up under a Node older than 22.19). These name the mismatch and the fix instead.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PEERS, REPO

MANIFESTS = sorted(
    [REPO / "peers" / "package.json", *(REPO / "peers").glob("*/package.json")],
    key=str,
)


def _installed_dir(manifest: Path) -> Path:
    """Where `make peers` installs a manifest: peers/X/package.json -> .peers/X/."""
    relative = manifest.parent.relative_to(REPO / "peers")
    return PEERS / relative


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda m: str(m.relative_to(REPO)))
def test_every_pinned_harness_is_installed_at_its_pin(manifest: Path) -> None:
    where = _installed_dir(manifest)
    if not (where / "node_modules").is_dir():
        pytest.skip(f"{where} is not installed: run `make peers`")
    asked = json.loads((where / "package.json").read_text())["dependencies"]
    if PEERS == REPO / ".peers":  # not scripts/peers_newest.py's newest versions
        pinned = json.loads(manifest.read_text())["dependencies"]
        assert asked == pinned, f"{where} holds other pins than {manifest}: run `make peers`"
    for package, version in asked.items():
        found = json.loads((where / "node_modules" / package / "package.json").read_text())
        assert found["version"] == version, (
            f"{package} {found['version']} in {where}, not {version}"
        )


def test_the_node_on_path_satisfies_every_installed_harness() -> None:
    """tests/conftest.py puts .peers/node/bin (Node 22 from PyPI) first on PATH."""
    node = shutil.which("node")
    assert node is not None, "no node on PATH: run `make peers` (it installs one)"
    if (PEERS / "node" / "bin" / "node").exists():
        assert Path(node) == PEERS / "node" / "bin" / "node", node
    have = _version(subprocess.run([node, "--version"], capture_output=True, text=True,
                                   timeout=30, check=True).stdout)  # fmt: skip
    checked = 0
    for manifest in MANIFESTS:
        where = _installed_dir(manifest) / "node_modules"
        if not where.is_dir():
            continue
        for package in json.loads(manifest.read_text())["dependencies"]:
            engines = json.loads((where / package / "package.json").read_text()).get("engines")
            wanted = (engines or {}).get("node", "")
            if wanted.startswith(">="):
                assert have >= _version(wanted), f"{package} wants node {wanted}, PATH has {have}"
                checked += 1
    if checked == 0:
        pytest.skip("no harness installed: run `make peers`")

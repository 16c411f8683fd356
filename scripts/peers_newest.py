"""`make peers-newest`: install the newest published harnesses beside the pins, run the
peers tier against them, and print what changed.

The pins (peers/package.json, installed into .peers/ by `make peers`) stay as they are:
the newest versions go into .peers-newest/ (the older pins, .peers/*/, and the Node the
harnesses run on, .peers/node/, are linked from .peers/, so the tests that compare
versions still find them), and the tier runs with ACTORS_PEERS pointing there
(tests/conftest.py). Printed: each package's pin and newest version, packages published
under a new name, the tests that fail against the newest versions and the exit status of
the run. Extra arguments go to pytest (a subset:
`make peers-newest PEERS_TESTS=tests/peers/test_claude_messaging.py`).

Asks the npm registry only about the packages pinned here (and their known new names),
through npm itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "peers" / "package.json"
TARGET = REPO / ".peers-newest"
PINNED = REPO / ".peers"
RENAMED = {"@mariozechner/pi-coding-agent": "@earendil-works/pi-coding-agent"}
"""Packages published under a new name since: reported, not installed (moving to the new
name is a re-pin of its own, as pi's was: peers/previous keeps the old name's last pin)."""


def newest(package: str) -> str:
    done = subprocess.run(
        ["npm", "view", package, "version"], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise SystemExit(f"npm view {package} failed: {done.stderr.strip()[:200]}")
    return done.stdout.strip()


def install(versions: dict[str, str]) -> None:
    """The newest versions into .peers-newest/ (npm install, as `make peers` does)."""
    TARGET.mkdir(exist_ok=True)
    manifest = {"name": "actors-peers-newest", "private": True, "dependencies": versions}
    (TARGET / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=TARGET,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    for pinned in sorted(PINNED.iterdir()) if PINNED.is_dir() else []:
        link = TARGET / pinned.name
        if pinned.is_dir() and pinned.name != "node_modules" and not link.exists():
            link.symlink_to(pinned)  # an older pin (peers/<pin>/) or node/


def failures(report: Path) -> list[str]:
    """The tests that failed or errored, from pytest's junit report."""
    if not report.exists():
        return []
    out = []
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            out.append(f"{case.get('classname')}::{case.get('name')}")
    return out


def main(argv: list[str]) -> int:
    node = PINNED / "node" / "bin"
    if not (node / "npm").exists():
        print("peers_newest: no Node in .peers/node/: run `make peers` first", file=sys.stderr)
        return 2
    os.environ["PATH"] = os.pathsep.join([str(node), os.environ.get("PATH", "")])
    pins: dict[str, str] = json.loads(PINS.read_text())["dependencies"]
    latest = {package: newest(package) for package in pins}
    print(f"{'package':<34} {'pin':<10} {'newest':<10}")
    for package, pin in pins.items():
        mark = "" if latest[package] == pin else "   <- newer"
        print(f"{package:<34} {pin:<10} {latest[package]:<10}{mark}")
    for old, new in RENAMED.items():
        if old in pins:
            print(f"{old} is published as {new} {newest(new)} (not installed: a re-pin)")
    if all(latest[package] == pin for package, pin in pins.items()):
        print("every pin is the newest published version")
    install(latest)
    report = TARGET / "peers-report.xml"
    env = {**os.environ, "ACTORS_PEERS": str(TARGET), "ACTORS_REQUIRE_PEERS": "1"}
    tests = argv or ["tests/peers"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    run = subprocess.run([*command, f"--junitxml={report}", *tests], env=env, cwd=REPO)
    failed = failures(report)
    print(f"\npeers tier against the newest versions: exit {run.returncode}")
    for name in failed:
        print(f"  fails on the newest versions: {name}")
    if not failed:
        print("  no test fails against them")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

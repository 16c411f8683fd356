"""`make peers-newest`: install the newest published harnesses beside the pins, run the
peers tier against them, and print what changed.

The pins stay as they are. Two sets of them follow the newest releases: peers/package.json
(installed into .peers/ by `make peers`) and peers/more/package.json (.peers/more/); their
newest versions go into .peers-newest/ and .peers-newest/more/. The older pins kept for a
second row (.peers/previous/, .peers/claude-previous/) and the Node the harnesses run on
(.peers/node/) are linked from .peers/, so the tests that compare versions still find
them; a set whose newest versions do not install here (a platform package missing from
the registry) is reported and linked at its pins instead. The tier runs with ACTORS_PEERS
pointing there (tests/conftest.py). Printed: each package's pin and newest version,
packages published under a new name, the tests that fail against the newest versions and
the exit status of the run. Extra arguments go to pytest (a subset:
`make peers-newest PEERS_TESTS=tests/peers/test_claude_messaging.py`).

Asks the npm registry only about the packages pinned here (and their known new names),
through npm itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / ".peers-newest"
PINNED = REPO / ".peers"
FOLLOWING = ("", "more")
"""The pin sets kept at the newest release (peers/<set>/package.json, installed into
.peers/<set>/); the other sets under peers/ are older pins, kept on purpose."""
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


def pins_of(pin_set: str) -> dict[str, str]:
    manifest = REPO / "peers" / pin_set / "package.json"
    return dict(json.loads(manifest.read_text())["dependencies"])


def install(pin_set: str, versions: dict[str, str]) -> bool:
    """One set's newest versions into .peers-newest/<set>/ (npm install, as `make peers`
    does); False, with npm's reason printed, when they do not install here."""
    target = TARGET / pin_set
    if target.is_symlink():
        target.unlink()  # linked at its pins by an earlier run
    target.mkdir(parents=True, exist_ok=True)
    manifest = {"name": f"actors-peers-newest{pin_set and '-' + pin_set}", "private": True,
                "dependencies": versions}  # fmt: skip
    (target / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=target,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = why_not(done.stderr)
        print(f"peers/{pin_set or '.'}: the newest versions do not install here ({reason});"
              " its pins are used instead")  # fmt: skip
    return done.returncode == 0


def why_not(npm_stderr: str) -> str:
    """npm's reason, without its `npm error` prefixes: the first line naming a missing
    version (a postinstall's nested npm says it deep in its output), else the last line."""
    lines = [line.replace("npm error", "").strip() for line in npm_stderr.splitlines()]
    lines = [line for line in lines if line]
    named = [line for line in lines if "No matching version" in line]
    return (named or lines or ["no message"])[0 if named else -1][:200]


def link_pins() -> None:
    """Everything of .peers/ the newest sets do not replace (older pins, node/, and a
    following set that did not install), linked in (not node/'s versioned targets)."""
    for pinned in sorted(PINNED.iterdir()) if PINNED.is_dir() else []:
        link = TARGET / pinned.name
        kept = pinned.name != "node_modules" and not pinned.name.startswith("node.")
        if pinned.is_dir() and kept and not link.exists():
            link.symlink_to(pinned)


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
    TARGET.mkdir(exist_ok=True)
    changed = False
    for pin_set in FOLLOWING:
        pins = pins_of(pin_set)
        latest = {package: newest(package) for package in pins}
        print(f"{'package':<34} {'pin':<10} {'newest':<10}")
        for package, pin in pins.items():
            mark = "" if latest[package] == pin else "   <- newer"
            print(f"{package:<34} {pin:<10} {latest[package]:<10}{mark}")
        for old, new in RENAMED.items():
            if old in pins:
                print(f"{old} is published as {new} {newest(new)} (not installed: a re-pin)")
        changed = changed or latest != pins
        if not install(pin_set, latest) and pin_set:
            shutil.rmtree(TARGET / pin_set)  # link_pins puts the pins there
    if not changed:
        print("every pin is the newest published version")
    link_pins()
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

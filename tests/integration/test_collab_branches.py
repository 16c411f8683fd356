"""The collab-branches recipe on a real git repository with a scripted agent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished
from tests.integration.test_backlog_swarm import repo  # noqa: F401  (the fixture)

AGENT = """\
import os, subprocess, sys
scope = sys.argv[-1]
if scope == "beta":
    # leaves debris behind, then fails; the recover step must clear it before attempt 2
    seen = os.path.exists("debris.txt")
    open("debris.txt", "w").write("left by a failed attempt")
    print(f"debris-before={seen}", file=sys.stderr)
    sys.exit(f"agent refused {scope}")
open(f"{scope}.txt", "w").write(f"work for {scope}\\n")
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", "commit", "-q", "-m", f"scope {scope}"], check=True)
"""


def test_a_failed_scope_leaves_its_siblings_ready(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    assert cli("session", "register", "--harness", "file", "--id", "coord").returncode == 0
    record = actors.spawn(
        "collab-branches",
        values={
            "scopes": "alpha,beta,gamma",
            "repo": str(repo),
            "agent_cmd": f"{sys.executable} {agent}",
            "base": "main",
        },
        session="coord",
    )
    summary = finished(record)
    assert summary["status"] == "done" and summary["degraded"], summary
    state = Path(record["state_dir"])
    report = json.loads((state / "collab" / "branches.json").read_text())
    assert [r["scope"] for r in report["ready"]] == ["alpha", "gamma"]
    assert report["merged"] is False
    for ready in report["ready"]:
        shown = subprocess.run(
            ["git", "log", "-1", "--format=%s", ready["branch"]],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout.strip() == f"scope {ready['scope']}"
    (failed,) = report["failed"]
    assert failed["scope"] == "beta" and failed["attempts"] == 2 and failed["resets"] == 1
    assert failed["reason"] == "agent exited 1: agent refused beta"
    beta = json.loads((state / "collab" / "beta.json").read_text())
    assert [e["event"] for e in beta["events"]] == [
        "attempt",
        "failed",
        "reset",
        "attempt",
        "failed",
    ]
    stderr_logs = sorted(state.glob("captures/*/stderr.log"))
    seen = [
        line for p in stderr_logs for line in p.read_text().splitlines() if "debris-before" in line
    ]
    assert seen == ["debris-before=False"] * 2  # the reset cleared it between the tries
    main_log = subprocess.run(
        ["git", "log", "--format=%s", "main"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert "scope" not in main_log.stdout  # never merged
    unread = SessionInbox(session_paths(home, "coord")).unread()
    # one follow-up for the one outcome: beta's failed attempts are in it, not sent apart
    (followup,) = unread
    assert followup["envelope"]["type"] == "run.done"
    body = followup["envelope"]["body"]
    assert body["degraded"] is True
    assert body["failure"]["exit_code"] == 1
    assert "scope beta: agent exited 1: agent refused beta" in body["failure"]["stderr_tail"]
    assert body["artifacts"]["branches"] == str(state / "collab" / "branches.json")
    assert "2 of 3 scope branches ready" in followup["envelope"]["body"]["result"]["body"]


def test_the_shipped_recipe_is_valid(home: StateRoot) -> None:
    proc = cli("spawn", "collab-branches", "-v", "scopes=[1", "-v", "repo=.", "-v", "agent_cmd=x")
    assert proc.returncode == 2 and "scopes" in proc.stderr and "Traceback" not in proc.stderr

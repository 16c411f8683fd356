"""A drained swarm's summary: what was done and failed, each branch ready to merge (and
whether it merges cleanly onto the base), each failed item with a retry command that
works when pasted.

A sibling module of backlog_worker.py (imported from the script's own directory). The
worker that drains the swarm (kept alive) or leaves it last (finishing) builds the
summary from the run's claim table (backlog_claims), writes it whole to
`<state_dir>/backlog/summary.json` (the run's `summary` artifact) and sends it as the
`swarm.drained` follow-up, cut to fit one message.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECIPE = "backlog-implementers"
BODY_BYTES = 48 * 1024
"""What the follow-up's body may take of a message's 64 KiB (the rest: its envelope)."""
REASON_CHARS = 300
COMMITS_SHOWN = 20


@dataclass(frozen=True)
class SwarmSettings:
    """What a retry needs to start the same work again, and where the swarm worked."""

    run_id: str
    repo: Path
    base: str
    keep_alive: bool
    task_timeout: float | None
    group: str
    """The group named by the run's values (empty: the swarm's own group, or none)."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def branch_report(repo: Path, base: str, branch: str) -> dict[str, Any] | None:
    """The branch's commits not on `base` (oldest first) and whether it merges onto the
    base without a conflict (git merge-tree, nothing written to any branch or worktree);
    None when the branch does not exist (nothing was done on it, it was dropped)."""
    head = _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    if head.returncode != 0:
        return None
    listed = _git(repo, "log", "--reverse", "--format=%H%x00%s", f"{base}..{branch}")
    commits = [
        {"commit": line.split("\0", 1)[0], "subject": line.split("\0", 1)[-1]}
        for line in listed.stdout.splitlines()
        if line
    ]
    clean: bool | None = None
    if commits:
        merged = _git(repo, "merge-tree", "--write-tree", base, branch)
        clean = True if merged.returncode == 0 else False if merged.returncode == 1 else None
    return {
        "branch": branch,
        "head": head.stdout.strip(),
        "commits": commits,
        "merges_cleanly": clean,
        "merge": f"git -C {shlex.quote(str(repo))} merge {shlex.quote(branch)}",
    }


def assign_command(run_id: str, claim: dict[str, Any]) -> str:
    """The `task.assign` that gives the claim's item (and its own commands, if its
    assignment named any) to the same worker again, as a shell line."""
    body: dict[str, Any] = {"item": claim["item"], **(claim.get("overrides") or {})}
    address = f"branch:{run_id}/{claim['worker']}"
    line = shlex.join(["actors", "message", address, "task.assign", json.dumps(body)])
    return f"{line} --body-json"


def retry_command(settings: SwarmSettings, claim: dict[str, Any], present: list[str]) -> str:
    """The command that does a failed (or interrupted) item again. A swarm kept alive
    takes it as a `task.assign` to the worker that had it (another one still `present`
    when that one is gone); a finished swarm's item is a new swarm of one worker with
    the same repository, base and commands (the run is over)."""
    if settings.keep_alive and present:
        worker = claim["worker"] if claim["worker"] in present else present[0]
        return assign_command(settings.run_id, {**claim, "worker": worker})
    words = ["actors", "spawn", RECIPE, "-v", f"repo={settings.repo}", "-v"]
    words += [f"base={settings.base}", "-v", "workers=1"]
    words += ["-v", f"items={json.dumps([claim['item']], ensure_ascii=False)}"]
    words += ["-v", f"agent_cmd={claim.get('agent_cmd') or ''}"]
    if claim.get("validate_cmd"):
        words += ["-v", f"validate_cmd={claim['validate_cmd']}"]
    if settings.task_timeout:
        words += ["-v", f"task_timeout={settings.task_timeout:g}"]
    if settings.group:
        words += ["-v", f"group={settings.group}"]
    return shlex.join(words)


def summarize(state: dict[str, Any], settings: SwarmSettings) -> dict[str, Any]:
    """The whole summary of the claim table `state` (nothing cut)."""
    claims = state["claims"]
    done = [c for c in claims if c.get("state") == "done"]
    failed = [c for c in claims if c.get("state") == "failed"]
    interrupted = [c for c in claims if c.get("state") not in ("done", "failed")]
    branches = []
    for name, worker in sorted(state["workers"].items(), key=lambda kv: _place(state, kv[0])):
        report = branch_report(settings.repo, settings.base, str(worker.get("branch") or ""))
        if report is not None and report["commits"]:
            branches.append({"worker": name, **report})
    open_items = len(state["items"]) - len({c["index"] for c in claims if c.get("index")})
    present = [n for n, w in state["workers"].items() if w.get("state") != "gone"]
    drains = state.get("drains") or []
    return {
        "run": settings.run_id,
        "drain": drains[-1]["drain"] if drains else 0,
        "done": len(done),
        "failed": len(failed),
        "interrupted": len(interrupted),
        "left": open_items,
        "base": settings.base,
        "base_commit": _git(
            settings.repo, "rev-parse", "--verify", "--quiet", settings.base
        ).stdout.strip()
        or None,
        "repo": str(settings.repo),
        "kept_alive": settings.keep_alive,
        "branches": branches,
        "failed_items": [
            {
                "task": c["task"],
                "item": c["item"],
                "worker": c["worker"],
                "reason": c.get("reason"),
                "failed_ref": c.get("failed_ref"),
                "retry": retry_command(settings, c, present),
            }
            for c in failed
        ],
        "interrupted_items": [
            {
                "task": c["task"],
                "item": c["item"],
                "worker": c["worker"],
                "reason": (state["workers"].get(c["worker"]) or {}).get("error"),
                "retry": retry_command(settings, c, present),
            }
            for c in interrupted
        ],
        "workers": {
            name: {k: w.get(k) for k in ("state", "branch", "error") if w.get(k) is not None}
            for name, w in state["workers"].items()
        },
        "tasks": [
            {k: c.get(k) for k in ("task", "item", "worker", "state", "commit", "reason")}
            for c in claims
        ],
    }


def _place(state: dict[str, Any], name: str) -> int:
    return int(state["workers"][name].get("index") or 0)


def headline(summary: dict[str, Any]) -> str:
    """`Run R drained: 5 done, 1 failed; 2 branches to merge (1 conflicts with main)`."""
    text = f"Run {summary['run']} drained: {summary['done']} done, {summary['failed']} failed"
    if summary["interrupted"]:
        text += f", {summary['interrupted']} interrupted"
    if summary["left"]:
        text += f", {summary['left']} left"
    count = len(summary["branches"])
    text += f"; {count} branch{'' if count == 1 else 'es'} to merge"
    conflicts = sum(1 for b in summary["branches"] if b["merges_cleanly"] is False)
    if conflicts:
        text += f" ({conflicts} conflict{'' if conflicts == 1 else 's'} with {summary['base']})"
    return text


def message_body(summary: dict[str, Any], path: Path) -> dict[str, Any]:
    """The follow-up's body: the summary without its task table (`actors result` has
    it, and the file all of it), reasons and commit lists cut, failed items dropped from
    the end until it fits one message; what was cut is counted."""
    body = {k: v for k, v in summary.items() if k != "tasks"}
    body["summary_file"] = str(path)
    body["next"] = f"actors result {summary['run']}"
    for failed in body["failed_items"] + body["interrupted_items"]:
        reason = failed.get("reason") or ""
        failed["reason"] = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + "…"
    for branch in body["branches"]:
        if len(branch["commits"]) > COMMITS_SHOWN:
            branch["commits_omitted"] = len(branch["commits"]) - COMMITS_SHOWN
            branch["commits"] = branch["commits"][-COMMITS_SHOWN:]
    for key in ("interrupted_items", "failed_items"):
        while _size(body) > BODY_BYTES and body[key]:
            body[key].pop()
            body[f"{key}_omitted"] = body.get(f"{key}_omitted", 0) + 1
    while _size(body) > BODY_BYTES and any(b["commits"] for b in body["branches"]):
        for branch in body["branches"]:
            if branch["commits"]:
                branch["commits_omitted"] = branch.get("commits_omitted", 0) + 1
                branch["commits"].pop(0)
    return body


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body).encode())


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Whole or not at all: a reader never sees half a summary."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)

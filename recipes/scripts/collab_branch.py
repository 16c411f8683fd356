#!/usr/bin/env python3
"""One scope of the collab-branches recipe: worktree, agent, commit check, report.

`run`: make (or reuse) the scope's git worktree on branch `collab/<run>/<scope>` from the
base, run the agent command there (the scope as its last argument), run the optional
check, and require at least one commit past the base. `reset`: the recipe's `recover`
step between attempts: the worktree back to the base, untracked files removed. `report`:
after every scope, remove the scopes' worktrees (the branches stay; a failed scope's
branch that never left the base goes), list ready branches and failed scopes (with their
reasons) in `<state>/collab/branches.json` and on stdout. Each scope's history
(attempts, resets, outcome) is kept in `<state>/collab/<scope>.json`. Nothing is ever
merged. `check`: the recipe's precheck.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from command_check import unstartable


class UserError(Exception):
    """A mistake in the recipe's values: one line on stderr, exit 2, no traceback."""


def _slug(scope: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", scope)
    slug = re.sub(r"\.{2,}", ".", slug).strip("-.")[:60].rstrip("-.")  # `..` is no ref name
    return re.sub(r"\.lock$", "-lock", slug) or "scope"


def _scope_list(text: str) -> list[str]:
    try:
        scopes = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        scopes = [s.strip() for s in text.split(",") if s.strip()]
    if not isinstance(scopes, list) or not scopes:
        raise UserError('scopes must be a non-empty list, e.g. \'["api","ui"]\' or api,ui')
    for scope in scopes:
        if (
            not isinstance(scope, str | int | float)
            or isinstance(scope, bool)
            or not str(scope).strip()
        ):
            raise UserError(f"scope {json.dumps(scope)} is not a name; give each scope as text")
    return [str(s) for s in scopes]


def _split(name: str, command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise UserError(f"{name} {command!r} cannot be split like a shell would ({exc})") from None


def check(args: argparse.Namespace) -> int:
    """The recipe's precheck, before anything exists: scopes that would share a branch
    (or worktree) once made into names, a repo or base that is not there, commands that
    cannot be split or cannot start (command_check)."""
    seen: dict[str, str] = {}
    for scope in _scope_list(args.scopes):
        key = _slug(scope).casefold()  # one branch file on a case-insensitive disk
        if key in seen and seen[key] == scope:
            raise UserError(f"scope {scope!r} is given twice; remove one")
        if key in seen:
            branch = f"collab/{args.run}/{_slug(scope)}"
            raise UserError(
                f"scopes {seen[key]!r} and {scope!r} would share the branch {branch};"
                " rename one of them"
            )
        seen[key] = scope
    if not Path(args.repo).is_dir():
        raise UserError(f"repo {args.repo} is not a directory")
    if _git(
        "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}", cwd=args.repo
    ).returncode:
        raise UserError(f"base {args.base!r} is not a commit in {args.repo}; pass -v base=BRANCH")
    agent = _split("agent_cmd", args.agent_cmd)
    if not agent:
        raise UserError("agent_cmd is empty; give the agent's command line")
    check_cmd = _split("check_cmd", args.check_cmd)
    for name, argv in (("agent_cmd", agent), ("check_cmd", check_cmd)):
        why = unstartable(argv, Path(args.repo), args.base) if argv else None
        if why:
            raise UserError(f"{name} cannot start: {why}; install it or give its full path")
    return 0


def _git(*args: str, cwd: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _record_path(state: Path, scope: str) -> Path:
    return state / "collab" / f"{_slug(scope)}.json"


def _load(state: Path, scope: str) -> dict[str, Any]:
    try:
        data = json.loads(_record_path(state, scope).read_text())
    except (OSError, ValueError, RecursionError):
        return {"scope": scope, "attempts": 0, "resets": 0, "events": []}
    return dict(data)


def _save(state: Path, scope: str, record: dict[str, Any]) -> None:
    path = _record_path(state, scope)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def _fail(state: Path, scope: str, record: dict[str, Any], reason: str) -> int:
    record.update(status="failed", reason=reason)
    record["events"].append({"ts": time.time(), "event": "failed", "reason": reason})
    _save(state, scope, record)
    print(f"scope {scope}: {reason}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    state, scope = Path(args.state), args.scope
    record = _load(state, scope)
    record["attempts"] += 1
    branch = f"collab/{args.run}/{_slug(scope)}"
    worktree = state / "collab" / "worktrees" / _slug(scope)
    record.update(branch=branch, worktree=str(worktree), status="running")
    record["events"].append({"ts": time.time(), "event": "attempt", "n": record["attempts"]})
    _save(state, scope, record)
    base = _git("rev-parse", args.base, cwd=args.repo)
    if base.returncode != 0:
        return _fail(state, scope, record, f"base {args.base!r} not found in {args.repo}")
    record["base_commit"] = base.stdout.strip()
    if not worktree.exists():
        made = _git("worktree", "add", "-B", branch, str(worktree), args.base, cwd=args.repo)
        if made.returncode != 0:
            return _fail(state, scope, record, f"git worktree add: {made.stderr.strip()}")
    command = [*_split("agent_cmd", args.agent_cmd), scope]
    try:
        agent = subprocess.run(command, cwd=worktree, check=False, capture_output=True, text=True)
    except OSError as exc:
        return _fail(state, scope, record, f"agent {command[0]!r} could not start: {exc.strerror}")
    # the agent's own words go to the run's stderr log; stdout stays this scope's result
    sys.stderr.write(agent.stdout + agent.stderr)
    if agent.returncode != 0:
        tail = (agent.stderr or agent.stdout).strip().splitlines()[-1:] or [""]
        return _fail(state, scope, record, f"agent exited {agent.returncode}: {tail[0]}")
    if args.check_cmd:
        try:
            check = subprocess.run(_split("check_cmd", args.check_cmd), cwd=worktree, check=False)
        except OSError as exc:
            return _fail(state, scope, record, f"check could not start: {exc.strerror}")
        if check.returncode != 0:
            return _fail(state, scope, record, f"check exited {check.returncode}")
    ahead = _git("rev-list", "--count", f"{record['base_commit']}..HEAD", cwd=worktree)
    if ahead.returncode != 0 or int(ahead.stdout.strip() or 0) == 0:
        return _fail(state, scope, record, "the agent made no commit")
    head = _git("rev-parse", "HEAD", cwd=worktree).stdout.strip()
    record.update(status="ready", commit=head, reason=None)
    record["events"].append({"ts": time.time(), "event": "ready", "commit": head})
    _save(state, scope, record)
    print(json.dumps({"scope": scope, "branch": branch, "commit": head}))
    return 0


def reset(args: argparse.Namespace) -> int:
    state, scope = Path(args.state), args.scope
    record = _load(state, scope)
    worktree = state / "collab" / "worktrees" / _slug(scope)
    if worktree.exists():
        for step in (["reset", "--hard", args.base], ["clean", "-fdx"]):
            done = _git(*step, cwd=worktree)
            if done.returncode != 0:
                print(f"reset failed: {done.stderr.strip()}", file=sys.stderr)
                return 1
    record["resets"] = int(record.get("resets", 0)) + 1
    record["events"].append({"ts": time.time(), "event": "reset", "to": args.base})
    _save(state, scope, record)
    return 0


def _tidy(repo: str, record: dict[str, Any]) -> None:
    """The scope's worktree removed (its branch stays) and git's record of it with it,
    so `git worktree prune` has nothing to report; a failed scope's branch that never
    moved from the base (nothing to keep) goes too."""
    worktree = record.get("worktree")
    if worktree and Path(worktree).exists():
        _git("worktree", "remove", "--force", str(worktree), cwd=repo)
    _git("worktree", "prune", cwd=repo)
    branch, base = record.get("branch"), record.get("base_commit")
    if record.get("status") != "ready" and branch and base:
        at = _git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repo)
        if at.stdout.strip() == base:
            _git("branch", "-D", str(branch), cwd=repo)


def report(args: argparse.Namespace) -> int:
    state = Path(args.state)
    scopes = _scope_list(args.scopes)
    ready, failed = [], []
    for scope in scopes:
        record = _load(state, str(scope))
        if args.repo:
            _tidy(args.repo, record)
        if record.get("status") == "ready":
            ready.append({k: record.get(k) for k in ("scope", "branch", "commit")})
        else:
            failed.append(
                {
                    "scope": scope,
                    "reason": record.get("reason") or "did not run",
                    "attempts": record.get("attempts", 0),
                    "resets": record.get("resets", 0),
                }
            )
    out = {"ready": ready, "failed": failed, "merged": False}
    path = state / "collab" / "branches.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps(out, indent=1))
    print(f"{len(ready)} of {len(scopes)} scope branches ready (not merged):")
    for item in ready:
        print(f"- {item['branch']} {item['commit'][:12]}")
    for item in failed:
        print(f"- FAILED {item['scope']}: {item['reason']} (attempts {item['attempts']})")
    return 0 if ready else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "reset"):
        cmd = sub.add_parser(name)
        for flag in ("--state", "--repo", "--base", "--run", "--scope"):
            cmd.add_argument(flag, required=True)
        if name == "run":
            cmd.add_argument("--agent-cmd", required=True)
            cmd.add_argument("--check-cmd", default="")
    rep = sub.add_parser("report")
    rep.add_argument("--state", required=True)
    rep.add_argument("--scopes", required=True)
    rep.add_argument("--repo", default="", help="remove the scopes' worktrees from it")
    pre = sub.add_parser("check")
    for flag in ("--scopes", "--repo", "--base", "--run", "--agent-cmd"):
        pre.add_argument(flag, required=True)
    pre.add_argument("--check-cmd", default="")
    args = parser.parse_args()
    commands = {"run": run, "reset": reset, "report": report, "check": check}
    try:
        return commands[args.command](args)
    except UserError as exc:
        print(f"collab-branches: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a repo or state directory that vanished, a full disk
        print(f"collab-branches: {exc.filename or ''}: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

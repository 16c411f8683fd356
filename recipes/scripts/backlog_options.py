"""The backlog worker's command line, checked and turned into a Worker's settings.

A sibling module of backlog_worker.py (imported from the script's own directory). Every
value the recipe passes is checked here, so a bad one is one line and exit 2 before the
worker touches the repository.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from backlog_commands import WorkerError


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--worker", required=True, help="branch id: front, back, ...")
    parser.add_argument("--end", choices=("top", "bottom"), required=True)
    parser.add_argument("--backlog", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--agent-cmd", required=True, help="command line, split with shlex")
    parser.add_argument("--validate-cmd", default="", help="command line; empty = none")
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--worktrees", default="", help="default: $ACTORS_STATE_DIR/worktrees")
    parser.add_argument("--git-branch", required=True)
    parser.add_argument("--task-timeout", default="0", help="seconds per command; 0 = none")
    parser.add_argument("--self-select", default="true")
    return parser.parse_args(argv)


def command_line(value: str, what: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise WorkerError(f"cannot split {what} {value!r}: {exc}") from None


def worker_settings(args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    """The Worker's fields from the command line; WorkerError naming a bad value."""
    backlog = Path(args.backlog).expanduser().resolve()
    if not backlog.is_file():
        raise WorkerError(f"backlog file {backlog} does not exist")
    agent_cmd = command_line(args.agent_cmd, "agent_cmd")
    if not agent_cmd:
        raise WorkerError("agent_cmd is empty")
    try:
        timeout = float(args.task_timeout)
    except ValueError:
        raise WorkerError(f"task_timeout {args.task_timeout!r} is not a number") from None
    worktrees = Path(args.worktrees).expanduser() if args.worktrees else state_dir / "worktrees"
    return {
        "name": args.worker,
        "end": args.end,
        "backlog": backlog,
        "repo": Path(args.repo).expanduser().resolve(),
        "git_branch": args.git_branch,
        "worktree": worktrees.resolve() / args.worker,
        "base": args.base,
        "agent_cmd": agent_cmd,
        "validate_cmd": command_line(args.validate_cmd, "validate_cmd"),
        "task_timeout": timeout if timeout > 0 else None,
        "self_select": args.self_select.strip().lower() not in ("false", "0", "no", "off", ""),
    }

"""The backlog worker's command line, checked and turned into a Worker's settings, and
the swarm's roster (who its workers are and from which end each one claims).

A sibling module of backlog_worker.py (imported from the script's own directory). Every
value the recipe passes is checked here, so a bad one is one line and exit 2 before the
worker touches the repository; the recipe's precheck (backlog_precheck.py) runs the same
checks at spawn, before anything exists.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from backlog_commands import WorkerError

MAX_WORKERS = 64
"""A parallel `repeat` runs at most 64 instances (docs/recipes.md)."""
FALSE_TEXTS = ("false", "0", "no", "off", "")


def parse_args(description: str, argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--index", default="0", help="this worker's place in the swarm, from 0")
    parser.add_argument("--workers", default="2", help="how many workers the swarm has")
    parser.add_argument("--backlog", default="", help="the backlog file")
    parser.add_argument("--items", default="", help="a JSON list of items instead of a file")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--agent-cmd", default="", help="command line, split with shlex")
    parser.add_argument("--agent-cmds", default="", help="a JSON list: one per worker, in turn")
    parser.add_argument("--validate-cmd", default="", help="command line; empty = none")
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--worktrees", default="", help="default: $ACTORS_STATE_DIR/worktrees")
    parser.add_argument("--task-timeout", default="0", help="seconds per command; 0 = none")
    parser.add_argument("--self-select", default="true")
    parser.add_argument("--keep-alive", default="false", help="stay up after the swarm drains")
    parser.add_argument("--group", default="", help="the actors group agents run in")
    parser.add_argument("--parallel", default="0", help="the own group's limit; 0 = workers")
    return parser.parse_args(argv)


# -- the roster ---------------------------------------------------------------------------


def worker_name(index: int, workers: int) -> str:
    """`front` and `back` for the two-worker swarm (the seed's names), `w1`..`wN` else."""
    if workers == 2:
        return ("front", "back")[index]
    return f"w{index + 1}"


def worker_end(index: int) -> str:
    """Even places claim from the top of the backlog, odd ones from the bottom."""
    return "top" if index % 2 == 0 else "bottom"


def roster(workers: int) -> list[str]:
    return [worker_name(i, workers) for i in range(workers)]


# -- values -------------------------------------------------------------------------------


def command_line(value: str, what: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise WorkerError(f"cannot split {what} {value!r}: {exc}") from None


def flag(value: str) -> bool:
    return value.strip().lower() not in FALSE_TEXTS


def whole(value: str, what: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise WorkerError(f"{what} {value!r} is not a whole number") from None
    if not low <= number <= high:
        raise WorkerError(f"{what} must be from {low} to {high}, got {number}")
    return number


def text_list(value: str, what: str) -> list[str]:
    """A list value as the template renders it (compact JSON); empty text is none."""
    if not value.strip():
        return []
    try:
        items = json.loads(value)
    except (ValueError, RecursionError):
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise WorkerError(f'{what} must be a JSON list of texts, e.g. \'["a","b"]\'')
    return items


def backlog_source(args: argparse.Namespace) -> tuple[Path | None, list[str]]:
    """The backlog file (resolved against the run's directory), or the items given."""
    items = text_list(args.items, "items")
    if args.backlog.strip() and items:
        raise WorkerError("give backlog or items, not both")
    if args.backlog.strip():
        return Path(args.backlog).expanduser().resolve(), []
    if not items:
        raise WorkerError("no backlog: pass -v backlog=FILE (or items='[...]')")
    if any(not item.strip() for item in items):
        raise WorkerError("items holds an empty item; give each item as text")
    return None, [item.strip() for item in items]


def agent_commands(args: argparse.Namespace) -> list[list[str]]:
    """Each agent command line, split: `agent_cmds` (one per worker, in turn), else the
    one `agent_cmd`; WorkerError when there is none or one cannot be split."""
    given = text_list(args.agent_cmds, "agent_cmds")
    lines = given or ([args.agent_cmd] if args.agent_cmd.strip() else [])
    if not lines:
        raise WorkerError("no agent command: pass -v agent_cmd='...' (or agent_cmds)")
    commands = []
    for line in lines:
        argv = command_line(line, "agent_cmd")
        if not argv:
            raise WorkerError("an agent command is empty; give the agent's command line")
        commands.append(argv)
    return commands


def worker_settings(args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    """The Worker's fields from the command line; WorkerError naming a bad value."""
    workers = whole(args.workers, "workers", 1, MAX_WORKERS)
    index = whole(args.index, "index", 0, workers - 1)
    backlog, items = backlog_source(args)
    if backlog is not None and not backlog.is_file():
        raise WorkerError(f"backlog file {backlog} does not exist")
    commands = agent_commands(args)
    try:
        timeout = float(args.task_timeout)
    except ValueError:
        raise WorkerError(f"task_timeout {args.task_timeout!r} is not a number") from None
    parallel = whole(args.parallel or "0", "parallel", 0, 1024)
    worktrees = Path(args.worktrees).expanduser() if args.worktrees else state_dir / "worktrees"
    name = worker_name(index, workers)
    return {
        "name": name,
        "index": index,
        "workers": workers,
        "end": worker_end(index),
        "backlog": backlog,
        "items": items,
        "repo": Path(args.repo).expanduser().resolve(),
        "worktree": worktrees.resolve() / name,
        "base": args.base,
        "agent_cmd": commands[index % len(commands)],
        "validate_cmd": command_line(args.validate_cmd, "validate_cmd"),
        "task_timeout": timeout if timeout > 0 else None,
        "self_select": flag(args.self_select),
        "keep_alive": flag(args.keep_alive),
        "group": args.group.strip(),
        "parallel": parallel,
    }

"""The `backlog-implementers` recipe's precheck: run by `actors spawn` before anything
exists, with the workers' own command line (backlog_options), so a swarm that could not
work is refused in one line (exit 2) and leaves no branch, worktree, claim or run.

It checks what every worker would find out only by failing each task in turn: the
number of workers, the backlog (a readable UTF-8 file, or the `items` list), a git
repository that has the base commit, and that each agent command and the validation
command can start (a program on PATH, an executable file, or a file the worktree will
have at the base).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from backlog_claims import parse_backlog
from backlog_commands import WorkerError
from backlog_finish import NO_GROUP
from backlog_git import git, git_ok
from backlog_options import (
    MAX_WORKERS,
    agent_commands,
    backlog_source,
    command_line,
    parse_args,
    whole,
)
from command_check import unstartable


def check(argv: list[str]) -> None:
    """WorkerError naming the first thing that would stop the swarm."""
    args = parse_args(__doc__.splitlines()[0], argv)
    whole(args.workers, "workers", 1, MAX_WORKERS)
    whole(args.parallel or "0", "parallel", 0, 1024)
    try:
        if float(args.task_timeout) < 0:
            raise ValueError
    except ValueError:
        raise WorkerError(
            f"task_timeout {args.task_timeout!r} is not a number of seconds"
        ) from None
    backlog, _ = backlog_source(args)
    if backlog is not None:
        if not backlog.is_file():
            raise WorkerError(f"backlog file {backlog} does not exist")
        try:
            parse_backlog(backlog.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise WorkerError(f"backlog file {backlog} is not UTF-8 text ({exc.reason})") from None
    repo = Path(args.repo).expanduser()
    if not repo.is_dir() or not git_ok("rev-parse", "--show-toplevel", cwd=repo):
        raise WorkerError(f"repo {repo} is not a git repository")
    top = Path(git("rev-parse", "--show-toplevel", cwd=repo))
    if not git_ok("rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}", cwd=top):
        raise WorkerError(f"base {args.base!r} is not a commit in {top}; pass -v base=BRANCH")
    for agent in agent_commands(args):
        why = unstartable(agent, top, args.base)
        if why:
            raise WorkerError(f"agent_cmd cannot start: {why}; install it or give its full path")
    named_group_exists(args.group.strip(), whole(args.parallel or "0", "parallel", 0, 1024))
    validate = command_line(args.validate_cmd, "validate_cmd")
    why = unstartable(validate, top, args.base) if validate else None
    if why:
        raise WorkerError(f"validate_cmd cannot start: {why}; install it or give its full path")


def named_group_exists(group: str, parallel: int) -> None:
    """A group named without a limit is used as it is, so it must exist already (its
    agents would each wait on a group nobody made). Unasked when `actors` is not on the
    caller's PATH: the workers then say it."""
    if group in ("", NO_GROUP) or parallel:
        return
    actors = shutil.which("actors")
    if actors is None:
        return
    listed = subprocess.run(
        [actors, "group", "ls", "--json"], capture_output=True, text=True, check=False
    )
    try:
        names = [g.get("group") for g in json.loads(listed.stdout)]
    except (ValueError, AttributeError):
        return  # an answer it cannot read: not a reason to refuse
    if listed.returncode == 0 and group not in names:
        raise WorkerError(
            f"group {group!r} does not exist; create it (actors group set {group}"
            " --parallel N) or pass -v parallel=N"
        )


def main(argv: list[str] | None = None) -> int:
    try:
        check(sys.argv[1:] if argv is None else argv)
    except WorkerError as exc:
        print(f"backlog-implementers: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an unreadable backlog, a repo that vanished
        print(f"backlog-implementers: {exc.filename or ''}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whether a command line a recipe was given can start, asked before anything runs.

A sibling module of the shipped recipe scripts (imported from their own directory): the
`backlog-implementers` and `collab-branches` prechecks refuse an agent or check command
that could only fail each task in turn (`codex` not installed, a path that is not an
executable file), in one line and before any branch or worktree exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ENV_OPTIONS_WITH_VALUE = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")


def program_of(argv: list[str]) -> str:
    """The program a command line starts: past `env`'s options and NAME=VALUE words
    (`env -u CLAUDECODE claude -p` starts `claude`)."""
    words = list(argv)
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]):
            words = words[2:] if words[0] in ENV_OPTIONS_WITH_VALUE else words[1:]
    return words[0] if words else argv[0]


def unstartable(argv: list[str], repo: Path, base: str) -> str | None:
    """Why `argv` could not start in a worktree of `repo` at `base`, or None: a bare name
    must be on PATH, a path an executable file (a relative one a file of the repository
    at `base`, where the worktree it runs in has it)."""
    program = program_of(argv)
    if "/" not in program:
        return None if shutil.which(program) else f"{program!r} is not on PATH"
    path = Path(program).expanduser()
    if path.is_absolute():
        if path.is_file() and os.access(path, os.X_OK):
            return None
        return f"{program!r} is not an executable file"
    listed = subprocess.run(
        ["git", "cat-file", "-e", f"{base}:{os.path.normpath(program)}"],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0:
        return None
    return f"{program!r} is not a file in {repo} at {base}"

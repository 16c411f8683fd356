"""A backlog worker's git worktree: its own branch, commits of what the agent left, and
failed attempts set aside under a ref instead of staying on the branch.

A sibling module of backlog_worker.py (imported from the script's own directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from backlog_commands import TAIL_CHARS, WorkerError


def git(*args: str, cwd: Path, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise WorkerError(f"git {' '.join(args[:2])} failed ({proc.returncode}): {detail}")
    return proc.stdout.strip()


def git_ok(*args: str, cwd: Path) -> bool:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass
class Worktree:
    """The worktree at `path`, on `branch` (created from `base` when it does not exist)."""

    repo: Path
    path: Path
    branch: str
    base: str

    def prepare(self, setup_lock: Path) -> bool:
        """Create (or reuse) the worktree; `setup_lock` keeps to one setup at a time (git's
        own worktree bookkeeping is not safe against a concurrent add or remove). True
        when the branch was created here (from `base`), False when it existed."""
        top = git("rev-parse", "--show-toplevel", cwd=self.repo)
        self.repo = Path(top)
        with file_lock(setup_lock):
            if (self.path / ".git").exists():
                current = git("symbolic-ref", "--short", "HEAD", cwd=self.path)
                if current != self.branch:
                    raise WorkerError(f"{self.path} is on {current}, not {self.branch}; remove it")
                return False
            if git_ok(
                "rev-parse", "--verify", "--quiet", f"refs/heads/{self.branch}", cwd=self.repo
            ):
                git("worktree", "add", str(self.path), self.branch, cwd=self.repo)
                return False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            git("worktree", "add", "-b", self.branch, str(self.path), self.base, cwd=self.repo)
            return True

    def remove(self, setup_lock: Path, *, drop_branch_at: str | None = None) -> None:
        """Remove the worktree (its branch stays, with every commit it has) and git's
        record of it, so `git worktree prune` has nothing left to report. With
        `drop_branch_at`, a branch still at that commit (nothing done on it) goes too."""
        with file_lock(setup_lock):
            if self.path.exists():
                git("worktree", "remove", "--force", str(self.path), cwd=self.repo, check=False)
            if self.path.exists():  # no longer a worktree git knows: the files only
                shutil.rmtree(self.path, ignore_errors=True)
            git("worktree", "prune", cwd=self.repo, check=False)
            if drop_branch_at is not None:
                at = git(
                    "rev-parse", "--verify", "--quiet", self.branch, cwd=self.repo, check=False
                )
                if at == drop_branch_at:
                    git("branch", "-D", self.branch, cwd=self.repo, check=False)

    def head(self) -> str:
        return git("rev-parse", "HEAD", cwd=self.path)

    def dirty(self) -> bool:
        return bool(git("status", "--porcelain", cwd=self.path))

    def commits_since(self, start: str, head: str) -> list[str]:
        return git("rev-list", "--reverse", f"{start}..{head}", cwd=self.path).split()

    def commit(self, message: str, author: str) -> tuple[bool, str]:
        """Commit everything left in the worktree; (committed, git's last words). A repo
        without a configured identity commits as `actors <author>`."""
        identity: list[str] = []
        if not git_ok("config", "user.name", cwd=self.path):
            identity += ["-c", f"user.name=actors {author}"]
        if not git_ok("config", "user.email", cwd=self.path):
            identity += ["-c", f"user.email=actors-{author}@localhost"]
        git("add", "-A", cwd=self.path)
        proc = subprocess.run(
            ["git", *identity, "commit", "--quiet", "-F", "-"],
            cwd=self.path,
            input=message,
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-TAIL_CHARS:]

    def set_aside(self, start: str, head: str, ref: str | None) -> None:
        """Back to `start`, clean; the commits up to `head` kept under `ref` if given."""
        if ref is not None:
            git("update-ref", ref, head, cwd=self.path)
        git("reset", "--hard", "--quiet", start, cwd=self.path)
        git("clean", "-fdq", cwd=self.path)

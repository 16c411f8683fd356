"""Where state lives: the state root, its sub-directories and each run's files.

The root is `$ACTORS_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/actors`. Run ids are
validated before they become path components, so no id can name anything outside `runs/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from runtime.core import config
from runtime.core.errors import BadInput, StateDamaged
from runtime.core.ids import ID_PATTERN, is_valid_id


def default_root() -> Path:
    """The state root chosen by the environment (not created here; see runtime.core.config)."""
    return Path(config.state_root())


def check_id(value: str, what: str = "run id") -> str:
    """Return `value` if it is a safe id, else raise a BadInput naming the rule."""
    if not is_valid_id(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise BadInput(
            f"invalid {what} {shown!r}",
            hint=f"use 1-64 characters matching {ID_PATTERN} (no '/', no leading '.')",
        )
    return value


def parse_run_ref(ref: str) -> str:
    """`run:ID` or a bare id -> the id (validated)."""
    if ref.startswith("run:"):
        ref = ref[4:]
    elif ":" in ref:
        raise BadInput(f"{ref!r} is not a run address", hint="use run:ID or the bare id")
    return check_id(ref)


class StateRoot(NamedTuple):
    """The directory tree every actors process shares."""

    path: Path

    @classmethod
    def from_env(cls) -> StateRoot:
        return cls(default_root())

    @property
    def runs(self) -> Path:
        return self.path / "runs"

    @property
    def archive(self) -> Path:
        return self.path / "archive"

    @property
    def preserved(self) -> Path:
        return self.path / "preserved"

    @property
    def sessions(self) -> Path:
        return self.path / "sessions"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    @property
    def cache(self) -> Path:
        return self.path / "cache"

    @property
    def index_file(self) -> Path:
        return self.path / "index.json"

    def run(self, run_id: str) -> RunPaths:
        """A run's paths; refused when the run directory (or runs/) is a planted symlink,
        so no reader or writer is ever led outside the state root through it."""
        paths = RunPaths(self.runs / check_id(run_id))
        refuse_symlinks(self.runs, paths.dir)
        return paths


def refuse_symlinks(*paths: Path) -> None:
    """State directories are never links: one planted there would lead readers and
    writers outside the state root."""
    for path in paths:
        if path.is_symlink():
            raise StateDamaged(
                f"{path} is a symlink; refusing to follow it",
                hint="state directories are never links; remove it",
            )


class RunPaths(NamedTuple):
    """The files of one run's state directory."""

    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def run_json(self) -> Path:
        return self.dir / "run.json"

    @property
    def progress(self) -> Path:
        return self.dir / "progress.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def inbox(self) -> Path:
        return self.dir / "inbox.jsonl"

    @property
    def wake(self) -> Path:
        return self.dir / "wake.jsonl"

    @property
    def outbox(self) -> Path:
        return self.dir / "outbox.jsonl"

    @property
    def stdout(self) -> Path:
        return self.dir / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.dir / "stderr.log"

    @property
    def runner_log(self) -> Path:
        return self.dir / "runner.log"

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def communication(self) -> Path:
        return self.dir / "communication.json"

    @property
    def token(self) -> Path:
        return self.dir / "token"

    @property
    def captures(self) -> Path:
        return self.dir / "captures"

    @property
    def branches(self) -> Path:
        return self.dir / "branches"

    @property
    def doorbells(self) -> Path:
        return self.dir / "doorbells"

    @property
    def room(self) -> Path:
        """The run's room timeline directory (`room:<run>`)."""
        return self.dir / "rooms" / "main"

    def branch_dir(self, branch: str) -> Path:
        return self.branches / branch

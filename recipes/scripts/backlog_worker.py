"""One persistent backlog implementer of the `backlog-implementers` recipe.

Run by the recipe as `python3 backlog_worker.py --worker=front --end=top ...` inside an
actors run. The worker acts as `branch:<run>/<worker>` (it sets ACTORS_BRANCH for its own
`actors recv` / `actors emit` calls) and loops:

1. take a task: a `task.assign` waiting in its branch inbox first, else (with
   self-selection on) the next unclaimed backlog item from its end, claimed atomically in
   `$ACTORS_STATE_DIR/backlog/claims.json` (under an flock, so two workers never take
   the same item);
2. post `task.claim` to `room:<run>` before touching the worktree;
3. run the agent (`--agent-cmd`, split with shlex, the item text appended as the last
   argument) with cwd = its own git worktree, then the validation (`--validate-cmd`, also
   split with shlex; empty = none), then commit what the agent left uncommitted;
4. post `task.result`, then `task.awaiting` (`idle: true` when it has nothing left to
   take and is about to block on its inbox);
5. when idle, block on `actors recv` for the next `task.assign` (no polling).

A failed task (agent or validation non-zero, timeout, commit refused) never stays on the
worker's branch: its commits are kept under `refs/actors/<run>/<worker>/failed-<task>`
and the branch is reset to where the task started. The run ends through the runner:
`actors message run:<run> control.kill` stops both workers at once.

This file only uses the standard library and the `actors` CLI (on PATH inside a run).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECV_TIMEOUT_EXIT = 75
"""`actors recv --timeout` exits with this when nothing arrived."""
REASON_CHARS = 1000
TAIL_CHARS = 400
TERM_GRACE_S = 5.0


class WorkerError(Exception):
    """A setup or runtime problem that stops this worker (exit 2)."""


# -- the backlog ------------------------------------------------------------------------

_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_CHECKBOX = re.compile(r"^\[([ xX])\]\s*")


def parse_backlog(text: str) -> list[str]:
    """One item per non-blank line; `#` lines are headings or comments.

    A leading list marker (`- `, `* `, `+ `, `1. `) and an open checkbox (`[ ]`) are
    stripped; a checked box (`- [x] done`) marks an item that is already done: skipped.
    """
    items = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = _LIST_MARKER.sub("", line, count=1)
        box = _CHECKBOX.match(line)
        if box:
            if box.group(1) in "xX":
                continue
            line = line[box.end() :]
        line = line.strip()
        if line:
            items.append(line)
    return items


@dataclass
class Task:
    """One unit of work for the agent."""

    number: int
    item: str
    index: int | None
    """1-based position in the backlog snapshot, None for an assignment outside it."""
    source: str
    """`backlog` (self-selected) or `assignment` (a task.assign)."""
    agent_cmd: list[str]
    validate_cmd: list[str]
    assignment_id: str | None = None


class Claims:
    """The run's shared claim table: `<state_dir>/backlog/claims.json`, under an flock.

    The backlog file is read once, by the first claim of the run, into `items`; every
    claim (self-selected or assigned) is appended to `claims` with its task number.
    """

    def __init__(self, state_dir: Path, backlog: Path) -> None:
        self.dir = state_dir / "backlog"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "claims.json"
        self.lock = self.dir / ".claims.lock"
        self.backlog = backlog

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self.file.exists():
                state = json.loads(self.file.read_text(encoding="utf-8"))
            else:
                text = self.backlog.read_text(encoding="utf-8")
                state = {"backlog": str(self.backlog), "items": parse_backlog(text), "claims": []}
            yield state
            tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(state, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.file)
        finally:
            os.close(fd)  # releases the flock

    @staticmethod
    def _open_indexes(state: dict[str, Any]) -> list[int]:
        taken = {c["index"] for c in state["claims"] if c.get("index") is not None}
        return [i for i in range(1, len(state["items"]) + 1) if i not in taken]

    @staticmethod
    def _record(
        state: dict[str, Any], worker: str, item: str, index: int | None, source: str
    ) -> int:
        number = len(state["claims"]) + 1
        state["claims"].append(
            {
                "task": number,
                "index": index,
                "item": item,
                "worker": worker,
                "source": source,
                "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            }
        )
        return number

    def claim_next(self, worker: str, end: str) -> tuple[int, int, str] | None:
        """Claim the first (top) or last (bottom) unclaimed item: (task, index, item)."""
        with self.locked() as state:
            open_ = self._open_indexes(state)
            if not open_:
                return None
            index = open_[0] if end == "top" else open_[-1]
            item = state["items"][index - 1]
            return self._record(state, worker, item, index, "backlog"), index, item

    def claim_assigned(self, worker: str, item: str) -> tuple[int, int | None]:
        """Record an assignment; an identical unclaimed backlog item is taken with it."""
        with self.locked() as state:
            index = next(
                (i for i in self._open_indexes(state) if state["items"][i - 1] == item), None
            )
            return self._record(state, worker, item, index, "assignment"), index

    def left(self) -> int:
        with self.locked() as state:
            return len(self._open_indexes(state))


# -- the actors runtime, through its CLI ------------------------------------------------


def post(kind: str, body: dict[str, Any], summary: str, level: str = "info") -> None:
    """Post one message to this run's room as branch:<run>/<worker>."""
    argv = ["actors", "emit", "--to", "room", kind, json.dumps(body), "--json"]
    argv += ["--summary", summary[:500], "--level", level]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise WorkerError(f"actors emit {kind} failed ({proc.returncode}): {proc.stderr.strip()}")


def receive(block: bool) -> dict[str, Any] | None:
    """The next message of this worker's branch inbox (marked handled), or None."""
    argv = ["actors", "recv", "--json"] + ([] if block else ["--timeout", "0"])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode == RECV_TIMEOUT_EXIT and not block:
        return None
    if proc.returncode != 0:
        raise WorkerError(f"actors recv failed ({proc.returncode}): {proc.stderr.strip()}")
    envelope: dict[str, Any] = json.loads(proc.stdout)
    return envelope


# -- git --------------------------------------------------------------------------------


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


# -- commands ---------------------------------------------------------------------------


def run_command(
    argv: list[str], cwd: Path, log: Path, env: dict[str, str], timeout: float | None
) -> tuple[int, str | None]:
    """Run argv in a process group of its own, output to `log`; (code, problem or None).

    The group is killed when the command ends (leftovers), times out, or this worker is
    stopped; the group stays in the run's session, so the runner's final sweep covers it.
    """
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            out.write(f"cannot start {argv[0]!r}: {exc.strerror}\n".encode())
            return code, f"cannot start {argv[0]!r}: {exc.strerror}"
    problem = None
    try:
        if not _wait_unreaped(proc, timeout):
            problem = f"timed out after {timeout:g}s"
            _killpg(proc.pid, signal.SIGTERM)
            if not _wait_unreaped(proc, TERM_GRACE_S):
                _killpg(proc.pid, signal.SIGKILL)
    finally:
        # Exited but not yet reaped: the group id cannot have been reused, so this hits
        # only what the command left behind (or, on an exception, the command itself).
        _killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    return code, problem


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float | None) -> bool:
    """Wait for the process to exit without reaping it; False on timeout."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        fd = opener(proc.pid)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(None if timeout is None else timeout * 1000))
        finally:
            os.close(fd)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:  # no pidfd: waitid(WNOWAIT) leaves the zombie in place
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if info is not None:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _tail(path: Path) -> str:
    try:
        text = path.read_bytes()[-TAIL_CHARS * 4 :].decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if not line.startswith("$ ")]
    return " | ".join(lines)[-TAIL_CHARS:]


# -- the worker -------------------------------------------------------------------------


@dataclass
class Worker:
    name: str
    end: str
    backlog: Path
    repo: Path
    git_branch: str
    worktree: Path
    base: str
    agent_cmd: list[str]
    validate_cmd: list[str]
    task_timeout: float | None
    self_select: bool
    state_dir: Path
    run_id: str
    claims: Claims = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        self.claims = Claims(self.state_dir, self.backlog)
        self.logs = self.state_dir / "backlog" / self.name
        self.logs.mkdir(parents=True, exist_ok=True)

    def say(self, text: str) -> None:
        print(f"[{self.name}] {text}", flush=True)

    # -- setup
    def prepare(self) -> None:
        """Create (or reuse) this worker's worktree on its own branch."""
        top = git("rev-parse", "--show-toplevel", cwd=self.repo)
        self.repo = Path(top)
        with file_lock(self.state_dir / "backlog" / ".git.lock"):  # one setup at a time
            if (self.worktree / ".git").exists():
                current = git("symbolic-ref", "--short", "HEAD", cwd=self.worktree)
                if current != self.git_branch:
                    raise WorkerError(
                        f"{self.worktree} is on {current}, not {self.git_branch}; remove it"
                    )
            elif git_ok(
                "rev-parse", "--verify", "--quiet", f"refs/heads/{self.git_branch}", cwd=self.repo
            ):
                git("worktree", "add", str(self.worktree), self.git_branch, cwd=self.repo)
            else:
                self.worktree.parent.mkdir(parents=True, exist_ok=True)
                git(
                    "worktree",
                    "add",
                    "-b",
                    self.git_branch,
                    str(self.worktree),
                    self.base,
                    cwd=self.repo,
                )
        self.say(
            f"worktree {self.worktree} on {self.git_branch} ({self.end} end of {self.backlog})"
        )

    # -- taking work
    def task_from(self, envelope: dict[str, Any]) -> Task | str | None:
        """A task from an inbox message; else why there is none (None: nothing to say)."""
        kind = envelope.get("type")
        if kind == "control.kill":  # only reachable if something wrote it here directly
            post("actor.leave", {"worker": self.name}, f"{self.name} leaves (control.kill)")
            self.say("control.kill: leaving")
            sys.exit(0)
        if kind != "task.assign":
            self.say(f"ignoring {kind} message {envelope.get('id')}")
            return None
        body = envelope.get("body")
        agent_cmd, validate_cmd = self.agent_cmd, self.validate_cmd
        item: Any = body
        if isinstance(body, dict):
            item = body.get("item")
            try:
                if "agent_cmd" in body:
                    agent_cmd = shlex.split(str(body["agent_cmd"]))
                if "validate_cmd" in body:
                    validate_cmd = shlex.split(str(body["validate_cmd"] or ""))
            except ValueError as exc:
                return self._reject(envelope, f"bad command line in task.assign: {exc}")
            if item is None and body.get("backlog") == "next":
                claimed = self.claims.claim_next(self.name, self.end)
                if claimed is None:
                    return "backlog end exhausted"
                number, index, text = claimed
                return Task(
                    number, text, index, "backlog", agent_cmd, validate_cmd, envelope.get("id")
                )
        if not isinstance(item, str) or not item.strip() or not agent_cmd:
            return self._reject(
                envelope,
                "task.assign needs a non-empty item: a text body, "
                '{"item": "..."} or {"backlog": "next"}',
            )
        task_number, position = self.claims.claim_assigned(self.name, item.strip())
        return Task(
            task_number,
            item.strip(),
            position,
            "assignment",
            agent_cmd,
            validate_cmd,
            envelope.get("id"),
        )

    def _reject(self, envelope: dict[str, Any], reason: str) -> str:
        post(
            "task.result",
            {
                "task": None,
                "item": None,
                "ok": False,
                "commit": None,
                "commits": [],
                "branch": self.git_branch,
                "worker": self.name,
                "reason": reason,
                "artifacts": {},
                "assignment": envelope.get("id"),
            },
            f"{self.name}: rejected task.assign {envelope.get('id')}",
            level="warning",
        )
        self.say(f"rejected {envelope.get('id')}: {reason}")
        return "rejected an assignment"

    def next_task(self) -> Task | None:
        """An assignment waiting in the inbox first, else the next item from our end."""
        while (envelope := receive(block=False)) is not None:
            task = self.task_from(envelope)
            if isinstance(task, Task):
                return task
        if not self.self_select:
            return None
        claimed = self.claims.claim_next(self.name, self.end)
        if claimed is None:
            return None
        number, index, item = claimed
        return Task(number, item, index, "backlog", self.agent_cmd, self.validate_cmd)

    # -- doing work
    def execute(self, task: Task) -> dict[str, Any]:
        started = time.monotonic()
        label = f"#{task.index}" if task.index is not None else "assignment"
        post(
            "task.claim",
            {
                "task": task.number,
                "item": task.item,
                "index": task.index,
                "source": task.source,
                "worker": self.name,
                "branch": self.git_branch,
                "worktree": str(self.worktree),
                "assignment": task.assignment_id,
            },
            f"{self.name} claims {label}: {task.item}"[:500],
        )
        self.say(f"claimed task {task.number} ({task.source} {label}): {task.item}")
        start = git("rev-parse", "HEAD", cwd=self.worktree)
        agent_log = self.logs / f"task-{task.number:03d}.agent.log"
        validate_log = self.logs / f"task-{task.number:03d}.validate.log"
        env = dict(
            os.environ,
            BACKLOG_ITEM=task.item,
            BACKLOG_TASK=str(task.number),
            BACKLOG_WORKER=self.name,
            BACKLOG_BRANCH=self.git_branch,
            BACKLOG_WORKTREE=str(self.worktree),
        )
        artifacts: dict[str, str] = {"agent_log": str(agent_log)}
        ok, reason = True, None
        code, problem = run_command(
            [*task.agent_cmd, task.item], self.worktree, agent_log, env, self.task_timeout
        )
        if problem or code != 0:
            ok, reason = False, f"agent {problem or f'exited {code}'}: {_tail(agent_log)}"
        elif task.validate_cmd:
            artifacts["validate_log"] = str(validate_log)
            code, problem = run_command(
                task.validate_cmd, self.worktree, validate_log, env, self.task_timeout
            )
            if problem or code != 0:
                ok = False
                reason = f"validation {problem or f'exited {code}'}: {_tail(validate_log)}"
        if git("status", "--porcelain", cwd=self.worktree):
            committed, detail = self.commit(task)
            if not committed:
                ok, reason = False, f"{reason + '; ' if reason else ''}commit failed: {detail}"
        head = git("rev-parse", "HEAD", cwd=self.worktree)
        commits = git("rev-list", "--reverse", f"{start}..{head}", cwd=self.worktree).split()
        commit = head if commits else None
        if not ok:
            if commits:
                ref = f"refs/actors/{self.run_id}/{self.name}/failed-{task.number:03d}"
                git("update-ref", ref, head, cwd=self.worktree)
                reason = f"{reason}; attempt kept at {ref}"
                artifacts["failed_ref"] = ref
            git("reset", "--hard", "--quiet", start, cwd=self.worktree)
            git("clean", "-fdq", cwd=self.worktree)
            commit, commits = None, []
        elif commit is None:
            reason = "no changes"
        return {
            "task": task.number,
            "item": task.item,
            "index": task.index,
            "source": task.source,
            "ok": ok,
            "commit": commit,
            "commits": commits,
            "branch": self.git_branch,
            "worker": self.name,
            "worktree": str(self.worktree),
            "reason": None if reason is None else reason[:REASON_CHARS],
            "artifacts": artifacts,
            "assignment": task.assignment_id,
            "duration_ms": round((time.monotonic() - started) * 1000),
        }

    def commit(self, task: Task) -> tuple[bool, str]:
        identity: list[str] = []
        if not git_ok("config", "user.name", cwd=self.worktree):
            identity += ["-c", f"user.name=actors {self.name}"]
        if not git_ok("config", "user.email", cwd=self.worktree):
            identity += ["-c", f"user.email=actors-{self.name}@localhost"]
        git("add", "-A", cwd=self.worktree)
        subject = task.item if len(task.item) <= 72 else task.item[:69] + "..."
        message = f"{subject}\n\nBacklog task {task.number} ({task.source}) by {self.name}.\n\nActors-Run: {self.run_id}\n"
        proc = subprocess.run(
            ["git", *identity, "commit", "--quiet", "-F", "-"],
            cwd=self.worktree,
            input=message,
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-TAIL_CHARS:]

    def report(self, result: dict[str, Any]) -> None:
        verdict = "done" if result["ok"] else "failed"
        short = (result["commit"] or "")[:12]
        post(
            "task.result",
            result,
            f"{self.name} {verdict}: {result['item']}" + (f" ({short})" if short else ""),
            level="info" if result["ok"] else "warning",
        )
        self.say(f"task {result['task']} {verdict} {short} {result['reason'] or ''}".rstrip())

    def awaiting(
        self,
        *,
        idle: bool,
        after: dict[str, Any] | None,
        reason: str | None = None,
        next_task: Task | None = None,
    ) -> None:
        body = {
            "worker": self.name,
            "idle": idle,
            "after": None if after is None else after.get("task"),
            "next": None
            if next_task is None
            else {"task": next_task.number, "item": next_task.item, "source": next_task.source},
            "backlog_left": self.claims.left(),
            "reason": reason,
            "pid": os.getpid(),
        }
        summary = (
            f"{self.name} awaiting assignment"
            if idle
            else f"{self.name} free; next: {next_task.item if next_task else ''}"
        )
        post("task.awaiting", body, summary[:500])
        if idle:
            self.say(f"awaiting assignment ({reason})")

    def idle_reason(self) -> str:
        return "backlog end exhausted" if self.self_select else "waiting for task.assign"

    def loop(self) -> None:
        task = self.next_task()
        if task is None:
            self.awaiting(idle=True, after=None, reason=self.idle_reason())
        while True:
            while task is None:
                got = self.task_from(receive(block=True) or {})
                if isinstance(got, Task):
                    task = got
                elif got is not None:  # still idle: say so again, with why
                    self.awaiting(idle=True, after=None, reason=got)
            try:
                result = self.execute(task)
            except WorkerError as exc:  # e.g. the agent broke the worktree: report, go on
                result = {
                    "task": task.number,
                    "item": task.item,
                    "index": task.index,
                    "source": task.source,
                    "ok": False,
                    "commit": None,
                    "commits": [],
                    "branch": self.git_branch,
                    "worker": self.name,
                    "worktree": str(self.worktree),
                    "reason": str(exc)[:REASON_CHARS],
                    "artifacts": {},
                    "assignment": task.assignment_id,
                }
            self.report(result)
            task = self.next_task()
            self.awaiting(
                idle=task is None,
                after=result,
                reason=self.idle_reason() if task is None else None,
                next_task=task,
            )


def _command_line(value: str, what: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise WorkerError(f"cannot split {what} {value!r}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    args = parser.parse_args(argv)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # control.stop: clean up, go
    try:
        run_id = os.environ["ACTORS_RUN_ID"]
        state_dir = Path(os.environ["ACTORS_STATE_DIR"])
    except KeyError:
        print("backlog_worker: run me inside an actors run", file=sys.stderr)
        return 2
    os.environ["ACTORS_BRANCH"] = args.worker  # our recv/emit act as branch:<run>/<worker>
    try:
        backlog = Path(args.backlog).expanduser().resolve()
        if not backlog.is_file():
            raise WorkerError(f"backlog file {backlog} does not exist")
        agent_cmd = _command_line(args.agent_cmd, "agent_cmd")
        if not agent_cmd:
            raise WorkerError("agent_cmd is empty")
        try:
            timeout = float(args.task_timeout)
        except ValueError:
            raise WorkerError(f"task_timeout {args.task_timeout!r} is not a number") from None
        worktrees = Path(args.worktrees).expanduser() if args.worktrees else state_dir / "worktrees"
        worker = Worker(
            name=args.worker,
            end=args.end,
            backlog=backlog,
            repo=Path(args.repo).expanduser().resolve(),
            git_branch=args.git_branch,
            worktree=worktrees.resolve() / args.worker,
            base=args.base,
            agent_cmd=agent_cmd,
            validate_cmd=_command_line(args.validate_cmd, "validate_cmd"),
            task_timeout=timeout if timeout > 0 else None,
            self_select=args.self_select.strip().lower() not in ("false", "0", "no", "off", ""),
            state_dir=state_dir,
            run_id=run_id,
        )
        worker.prepare()
        worker.loop()
    except WorkerError as exc:
        print(f"backlog_worker[{args.worker}]: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

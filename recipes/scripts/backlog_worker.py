"""One persistent backlog implementer of the `backlog-implementers` recipe.

Run by the recipe as `python3 backlog_worker.py --index=K --workers=N ...` inside an
actors run, once per worker (a parallel `repeat`). Worker K is named `front` / `back`
in a swarm of two, else `wK+1`; it claims from the top of the backlog when K is even,
from the bottom when K is odd. It acts as `branch:<run>/<name>` (it sets ACTORS_BRANCH
for its own `actors recv` / `actors emit` calls) and loops:

1. take a task: a `task.assign` waiting in its branch inbox first, else (with
   self-selection on) the next unclaimed backlog item from its end, claimed atomically in
   `$ACTORS_STATE_DIR/backlog/claims.json` (under an flock, so no two workers ever take
   the same item);
2. post `task.claim` to `room:<run>` before touching the worktree;
3. run the agent (`--agent-cmd`, split with shlex, the item text appended as the last
   argument; `actors group run GROUP -- ...` around it, so no more agents run at once
   than the swarm's group allows) with cwd = its own git worktree, then the validation
   (`--validate-cmd`, the same way; empty = none), then commit what the agent left
   uncommitted;
4. post `task.result`, then `task.awaiting` (`idle: true` when it has nothing left to
   take and is about to block on its inbox); a failed task is also sent to the
   coordinator as one `task.failed` follow-up naming the task, why, and the command that
   retries it (the room only records: nobody is woken by it);
5. when idle, mark itself idle in the claim table and block on `actors recv` for the
   next `task.assign` (no polling).

The finish line: the worker whose idleness leaves every worker idle with nothing
unclaimed has drained the swarm (the claim table decides, under its lock, so exactly one
worker sees it). Kept alive (`--keep-alive`), it sends the coordinator one
`swarm.drained` follow-up and everyone waits for more work. Otherwise it sends each
worker a `swarm.finish`; each one takes what its inbox still holds before it, then
leaves: removes its worktree (its branch stays; a branch it made and never moved goes),
and the last one out sends the `swarm.drained` follow-up. Every worker then exits 0, so
the run ends `done` by itself.

A failed task (agent or validation non-zero, timeout, commit refused) never stays on the
worker's branch: its commits are kept under `refs/actors/<run>/<worker>/failed-<task>`
and the branch is reset to where the task started. `actors message run:<run>
control.stop` stops every worker (each removes its worktree); `control.kill` kills them.

This script only uses the standard library, the `actors` CLI (on PATH inside a run) and
its sibling modules (imported from its own directory, sys.path[0] when run as a file):
backlog_claims (the backlog, the claim table and the swarm's roster), backlog_commands
(the `actors` CLI, the agent and validation commands), backlog_finish (the worker as a
member of its swarm: the group, the peers, the finish line), backlog_git (the worker's
worktree), backlog_options (its command line), backlog_summary (the drained summary) and
command_check (whether a command can start).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backlog_claims import Claims, Task
from backlog_commands import (
    WorkerError,
    follow_up,
    post,
    receive,
    receive_watching,
    run_command,
    start_ticks,
    tail,
    unfound,
)
from backlog_finish import FINISH, SwarmMember
from backlog_git import Worktree
from backlog_options import parse_args, roster, worker_settings
from backlog_summary import assign_command
from command_check import program_of

REASON_CHARS = 1000


class Finish:
    """`task_from`'s answer to a `swarm.finish` of a finishing swarm: leave."""


# -- the worker -------------------------------------------------------------------------


@dataclass
class Worker(SwarmMember):
    """One implementer: takes tasks, runs them in its worktree, reports to the room."""

    name: str
    index: int
    workers: int
    end: str
    backlog: Path | None
    items: list[str]
    repo: Path
    worktree: Path
    base: str
    agent_cmd: list[str]
    validate_cmd: list[str]
    task_timeout: float | None
    self_select: bool
    keep_alive: bool
    group: str
    parallel: int
    state_dir: Path
    run_id: str
    claims: Claims = field(init=False)
    tree: Worktree = field(init=False)
    logs: Path = field(init=False)
    git_branch: str = field(init=False)
    start: str | None = field(init=False, default=None)
    """The commit the branch was made at, when this worker made it (else None)."""
    joined: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.git_branch = f"actors/{self.run_id}/{self.name}"
        self.claims = Claims(
            self.state_dir,
            self.backlog,
            self.items,
            roster(self.workers),
            self_select=self.self_select,
            keep_alive=self.keep_alive,
        )
        self.tree = Worktree(self.repo, self.worktree, self.git_branch, self.base)
        self.logs = self.state_dir / "backlog" / self.name
        self.logs.mkdir(parents=True, exist_ok=True)

    # -- setup
    def prepare(self) -> None:
        """Create (or reuse) this worker's worktree on its own branch, join the roster,
        and make sure the swarm's group exists (the first worker sets it up)."""
        created = self.tree.prepare(self.setup_lock)
        self.start = self.tree.head() if created else None
        self.claims.join(
            self.name,
            index=self.index,
            branch=self.git_branch,
            worktree=str(self.worktree),
            pid=os.getpid(),
            ticks=start_ticks(os.getpid()),
        )
        self.joined = True
        self.set_group()
        self.say(
            f"worktree {self.worktree} on {self.git_branch} ({self.end} end of "
            f"{self.backlog or 'the items given'})"
        )

    # -- taking work
    def task_from(self, envelope: dict[str, Any]) -> Task | Finish | str | None:
        """A task from an inbox message, or Finish; else why there is none (None:
        nothing to say)."""
        kind = envelope.get("type")
        if kind == "control.kill":  # only reachable if something wrote it here directly
            post("actor.leave", {"worker": self.name}, f"{self.name} leaves (control.kill)")
            self.say("control.kill: leaving")
            sys.exit(0)
        if kind == FINISH:
            if self.claims.finishing():
                return Finish()
            self.say(f"ignoring {FINISH} {envelope.get('id')}: the swarm has not drained")
            return None
        if kind != "task.assign":
            self.say(f"ignoring {kind} message {envelope.get('id')}")
            return None
        body = envelope.get("body")
        agent_cmd, validate_cmd = self.agent_cmd, self.validate_cmd
        overrides: dict[str, str] = {}
        item: Any = body
        if isinstance(body, dict):
            item = body.get("item")
            try:
                if "agent_cmd" in body:
                    overrides["agent_cmd"] = str(body["agent_cmd"])
                    agent_cmd = shlex.split(overrides["agent_cmd"])
                if "validate_cmd" in body:
                    overrides["validate_cmd"] = str(body["validate_cmd"] or "")
                    validate_cmd = shlex.split(overrides["validate_cmd"])
            except ValueError as exc:
                return self._reject(envelope, f"bad command line in task.assign: {exc}")
            if item is None and body.get("backlog") == "next":
                claimed = self.claims.claim_next(self.name, self.end)
                if claimed is None:
                    return "backlog end exhausted"
                number, index, text = claimed
                return Task(
                    number,
                    text,
                    index,
                    "backlog",
                    agent_cmd,
                    validate_cmd,
                    envelope.get("id"),
                    overrides,
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
            overrides,
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

    def next_task(self) -> Task | Finish | None:
        """An assignment waiting in the inbox first, else the next item from our end."""
        while (envelope := receive(block=False)) is not None:
            task = self.task_from(envelope)
            if isinstance(task, Task | Finish):
                return task
        if not self.self_select:
            return None
        claimed = self.claims.claim_next(self.name, self.end)
        if claimed is None:
            return None
        number, index, item = claimed
        return Task(number, item, index, "backlog", self.agent_cmd, self.validate_cmd)

    def wait_for_task(self, after: dict[str, Any] | None) -> Task | Finish:
        """Idle: say so, see whether that drains the swarm, then block on the inbox (no
        polling) until a task, or the swarm's finish, comes."""
        self.awaiting(idle=True, after=after, reason=self.idle_reason())
        if self.claims.idle(self.name):
            self.drained()
        while True:
            got = self.task_from(receive_watching(self.watched_peers(), self.bury))
            if isinstance(got, Task | Finish):
                return got
            if got is not None:  # still idle: say so again, with why
                self.awaiting(idle=True, after=None, reason=got)

    # -- doing work
    def execute(self, task: Task) -> dict[str, Any]:
        """Claim in the room, run the agent and the validation, commit; a failure leaves
        nothing on the branch (its commits set aside under a ref)."""
        started = time.monotonic()
        # the commands first: a task whose worker dies mid-way is retried with them
        self.claims.note(
            task.number,
            {
                "agent_cmd": shlex.join(task.agent_cmd),
                "validate_cmd": shlex.join(task.validate_cmd),
                "overrides": task.overrides,
            },
        )
        self._announce(task)
        start = self.tree.head()
        artifacts: dict[str, str] = {}
        reason = self._run_commands(task, artifacts)
        ok = reason is None
        if self.tree.dirty():
            committed, detail = self.commit(task)
            if not committed:
                ok, reason = False, f"{reason + '; ' if reason else ''}commit failed: {detail}"
        head = self.tree.head()
        commits = self.tree.commits_since(start, head)
        commit = head if commits else None
        if not ok:
            ref = None
            if commits:
                ref = f"refs/actors/{self.run_id}/{self.name}/failed-{task.number:03d}"
                reason = f"{reason}; attempt kept at {ref}"
                artifacts["failed_ref"] = ref
            self.tree.set_aside(start, head, ref)
            commit, commits = None, []
        elif commit is None:
            reason = "no changes"
        result = self._result(task, ok, reason, commit, commits, artifacts)
        return {**result, "duration_ms": round((time.monotonic() - started) * 1000)}

    def _announce(self, task: Task) -> None:
        """`task.claim` to the room, before the worktree is touched."""
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

    def _run_commands(self, task: Task, artifacts: dict[str, str]) -> str | None:
        """The agent, then (if it succeeded) the validation; why the task failed, or None."""
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
        artifacts["agent_log"] = str(agent_log)
        why = self._run("agent", [*task.agent_cmd, task.item], agent_log, env)
        if why is not None or not task.validate_cmd:
            return why
        artifacts["validate_log"] = str(validate_log)
        return self._run("validation", task.validate_cmd, validate_log, env)

    def _run(self, what: str, argv: list[str], log: Path, env: dict[str, str]) -> str | None:
        """One command of a task, in a slot of the swarm's group; why it failed, or None.
        A program that cannot start is said once, before any slot is taken."""
        missing = unfound(program_of(argv), self.worktree, env)
        if missing:
            return f"{what} cannot start {program_of(argv)!r}: {missing}"
        code, problem = run_command(self.in_group(argv), self.worktree, log, env, self.task_timeout)
        if problem or code != 0:
            return _why(what, code, problem, log)
        return None

    def commit(self, task: Task) -> tuple[bool, str]:
        subject = task.item if len(task.item) <= 72 else task.item[:69] + "..."
        message = f"{subject}\n\nBacklog task {task.number} ({task.source}) by {self.name}.\n\nActors-Run: {self.run_id}\n"
        return self.tree.commit(message, self.name)

    def _result(
        self,
        task: Task,
        ok: bool,
        reason: str | None,
        commit: str | None,
        commits: list[str],
        artifacts: dict[str, str],
    ) -> dict[str, Any]:
        """The body of `task.result`."""
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
        }

    def settle(self, task: Task, result: dict[str, Any]) -> None:
        """The task's outcome in the claim table, where the drained summary reads it."""
        self.claims.note(
            task.number,
            {
                "state": "done" if result["ok"] else "failed",
                "commit": result["commit"],
                "commits": result["commits"],
                "reason": result["reason"],
                "failed_ref": result["artifacts"].get("failed_ref"),
            },
        )

    def report(self, result: dict[str, Any], task: Task) -> None:
        verdict = "done" if result["ok"] else "failed"
        short = (result["commit"] or "")[:12]
        post(
            "task.result",
            result,
            f"{self.name} {verdict}: {result['item']}" + (f" ({short})" if short else ""),
            level="info" if result["ok"] else "warning",
        )
        self.say(f"task {result['task']} {verdict} {short} {result['reason'] or ''}".rstrip())
        if not result["ok"]:
            self.tell_failure(result, task)

    def tell_failure(self, result: dict[str, Any], task: Task) -> None:
        """One `task.failed` follow-up per failed task: the coordinator decides what next.
        Its `retry` gives the item (with the assignment's own commands) to this worker
        again, pasted as it is."""
        claim = {"item": result["item"], "worker": self.name, "overrides": task.overrides}
        body = {**result, "run": self.run_id, "retry": assign_command(self.run_id, claim)}
        reason = " ".join(str(result["reason"] or "failed").split())
        summary = f"Run {self.run_id}: {self.name} failed task {result['task']} ({result['item']}): {reason}"
        tail_ = f"; next: actors inspect room:{self.run_id}"
        follow_up("task.failed", body, summary[: 500 - len(tail_)] + tail_)

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
        """Work until the swarm finishes (a kept-alive swarm: until the run is stopped)."""
        after: dict[str, Any] | None = None
        task = self.next_task()
        while True:
            if task is None:
                task = self.wait_for_task(after)
            if isinstance(task, Finish):
                return
            try:
                result = self.execute(task)
            except WorkerError as exc:  # e.g. the agent broke the worktree: report, go on
                result = self._result(task, False, str(exc), None, [], {})
            self.settle(task, result)
            self.report(result, task)
            after = result
            task = self.next_task()
            if isinstance(task, Task):
                self.awaiting(idle=False, after=result, next_task=task)


def _why(what: str, code: int, problem: str | None, log: Path) -> str:
    """Why a command failed: a command that could not start says so once (its log holds
    only that line), else how it ended and the tail of its output."""
    if problem and problem.startswith("cannot start"):
        return f"{what} {problem}"
    return f"{what} {problem or f'exited {code}'}: {tail(log)}"


def _stop(*_: Any) -> None:
    """control.stop (SIGTERM): unwind (the running command's group is killed on the way
    out), then leave the swarm; a second SIGTERM while leaving is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop)
    args = parse_args(__doc__.splitlines()[0], argv)
    try:
        run_id = os.environ["ACTORS_RUN_ID"]
        state_dir = Path(os.environ["ACTORS_STATE_DIR"])
    except KeyError:
        print("backlog_worker: run me inside an actors run", file=sys.stderr)
        return 2
    worker: Worker | None = None
    label = f"worker {args.index}"
    try:
        settings = worker_settings(args, state_dir)
        label = settings["name"]
        os.environ["ACTORS_BRANCH"] = label  # our recv/emit act as branch:<run>/<name>
        worker = Worker(**settings, state_dir=state_dir, run_id=run_id)
        worker.prepare()
        worker.loop()
        worker.leave()
    except SystemExit as stop:
        if worker is not None:
            _leave_quietly(worker, "stopped", may_drain=False)
        raise stop
    except WorkerError as exc:
        print(f"backlog_worker[{label}]: {exc}", file=sys.stderr, flush=True)
        if worker is not None:
            _leave_quietly(worker, str(exc))
        return 2
    except (OSError, ValueError) as exc:  # an unreadable or non-UTF-8 backlog, a full disk
        where = getattr(exc, "filename", None) or args.backlog
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"backlog_worker[{label}]: {where}: {why}", file=sys.stderr, flush=True)
        if worker is not None:
            _leave_quietly(worker, f"{where}: {why}")
        return 2
    return 0


def _leave_quietly(worker: Worker, why: str, *, may_drain: bool = True) -> None:
    """Leave on the way out of an error or a stop; a second problem is only said."""
    try:
        worker.leave(why, may_drain=may_drain)
    except (WorkerError, OSError, ValueError) as exc:
        print(f"backlog_worker[{worker.name}]: while leaving: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

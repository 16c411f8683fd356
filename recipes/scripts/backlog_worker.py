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
   take and is about to block on its inbox); a failed task is also sent to the
   coordinator as one `task.failed` follow-up naming the task and why (the room only
   records: nobody is woken by it);
5. when idle, block on `actors recv` for the next `task.assign` (no polling).

A failed task (agent or validation non-zero, timeout, commit refused) never stays on the
worker's branch: its commits are kept under `refs/actors/<run>/<worker>/failed-<task>`
and the branch is reset to where the task started. The run ends through the runner:
`actors message run:<run> control.kill` stops both workers at once.

This script only uses the standard library, the `actors` CLI (on PATH inside a run) and
its sibling modules (imported from its own directory, sys.path[0] when run as a file):
backlog_claims (the backlog and the run's claim table), backlog_commands (the `actors`
CLI, the agent and validation commands), backlog_git (the worker's worktree) and
backlog_options (its command line).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backlog_claims import Claims, Task
from backlog_commands import WorkerError, follow_up, post, receive, run_command, tail
from backlog_git import Worktree
from backlog_options import parse_args, worker_settings

REASON_CHARS = 1000


# -- the worker -------------------------------------------------------------------------


@dataclass
class Worker:
    """One implementer: takes tasks, runs them in its worktree, reports to the room."""

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
    tree: Worktree = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        self.claims = Claims(self.state_dir, self.backlog)
        self.tree = Worktree(self.repo, self.worktree, self.git_branch, self.base)
        self.logs = self.state_dir / "backlog" / self.name
        self.logs.mkdir(parents=True, exist_ok=True)

    def say(self, text: str) -> None:
        print(f"[{self.name}] {text}", flush=True)

    # -- setup
    def prepare(self) -> None:
        """Create (or reuse) this worker's worktree on its own branch."""
        self.tree.prepare(self.state_dir / "backlog" / ".git.lock")
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
        """Claim in the room, run the agent and the validation, commit; a failure leaves
        nothing on the branch (its commits set aside under a ref)."""
        started = time.monotonic()
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
        code, problem = run_command(
            [*task.agent_cmd, task.item], self.worktree, agent_log, env, self.task_timeout
        )
        if problem or code != 0:
            return f"agent {problem or f'exited {code}'}: {tail(agent_log)}"
        if not task.validate_cmd:
            return None
        artifacts["validate_log"] = str(validate_log)
        code, problem = run_command(
            task.validate_cmd, self.worktree, validate_log, env, self.task_timeout
        )
        if problem or code != 0:
            return f"validation {problem or f'exited {code}'}: {tail(validate_log)}"
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
        if not result["ok"]:
            self.tell_failure(result)

    def tell_failure(self, result: dict[str, Any]) -> None:
        """One `task.failed` follow-up per failed task: the coordinator decides what next."""
        retry = json.dumps({"item": result["item"]})
        branch = f"branch:{self.run_id}/{self.name}"
        body = {
            **result,
            "run": self.run_id,
            "retry": f"actors message {branch} task.assign {shlex.quote(retry)}",
        }
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
                result = self._result(task, False, str(exc), None, [], {})
            self.report(result)
            task = self.next_task()
            self.awaiting(
                idle=task is None,
                after=result,
                reason=self.idle_reason() if task is None else None,
                next_task=task,
            )


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # control.stop: clean up, go
    args = parse_args(__doc__.splitlines()[0], argv)
    try:
        run_id = os.environ["ACTORS_RUN_ID"]
        state_dir = Path(os.environ["ACTORS_STATE_DIR"])
    except KeyError:
        print("backlog_worker: run me inside an actors run", file=sys.stderr)
        return 2
    os.environ["ACTORS_BRANCH"] = args.worker  # our recv/emit act as branch:<run>/<worker>
    try:
        worker = Worker(**worker_settings(args, state_dir), state_dir=state_dir, run_id=run_id)
        worker.prepare()
        worker.loop()
    except WorkerError as exc:
        print(f"backlog_worker[{args.worker}]: {exc}", file=sys.stderr, flush=True)
        return 2
    except (OSError, ValueError) as exc:  # an unreadable or non-UTF-8 backlog, a full disk
        where = getattr(exc, "filename", None) or args.backlog
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"backlog_worker[{args.worker}]: {where}: {why}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

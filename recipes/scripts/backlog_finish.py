"""A backlog worker as a member of its swarm: the group its agents run in, the peers it
watches, and the finish line.

A sibling module of backlog_worker.py (imported from the script's own directory):
`Worker` (backlog_worker) is a `SwarmMember`, which holds what concerns the swarm as a
whole rather than one task:

- the group: the first worker sets the swarm's own group up (`actors group set`), every
  agent and validation runs through `actors group run`, the last worker out forgets it;
- the peers: an idle worker watches every other worker's process, and buries one that
  ended without leaving (killed, out of memory), so no swarm waits for a dead worker;
- the finish line: the worker that drains the swarm tells the others to finish (or,
  kept alive, tells the coordinator); a worker leaves with its worktree removed, and the
  last one out of a finishing swarm sends the one `swarm.drained` follow-up.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from backlog_claims import Claims
from backlog_commands import WorkerError, follow_up, post, run_command, tail, tell_workers
from backlog_git import Worktree, file_lock
from backlog_options import roster
from backlog_summary import SwarmSettings, headline, message_body, summarize, write_summary

FINISH = "swarm.finish"
"""The message that tells a worker of a finishing swarm to leave (after what came before)."""
NO_GROUP = "none"
ID_CHARS = 64
"""The longest id actors takes (a run's, a group's)."""


def own_group(run_id: str) -> str:
    """The swarm's own group: `swarm-<run>`, kept to the 64 characters of an id (a long
    run id is cut and a digest of it added, so two runs never share one)."""
    name = f"swarm-{run_id}"
    if len(name) <= ID_CHARS:
        return name
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"{name[: ID_CHARS - 9]}-{digest}"


class SwarmMember:
    """What a worker does as one of the swarm (see the module's docstring). The fields
    are the Worker dataclass's, declared here for the methods below."""

    name: str
    workers: int
    base: str
    keep_alive: bool
    task_timeout: float | None
    group: str
    parallel: int
    state_dir: Path
    run_id: str
    claims: Claims
    tree: Worktree
    logs: Path
    git_branch: str
    start: str | None
    joined: bool

    def say(self, text: str) -> None:
        print(f"[{self.name}] {text}", flush=True)

    @property
    def setup_lock(self) -> Path:
        return self.state_dir / "backlog" / ".git.lock"

    @property
    def group_name(self) -> str | None:
        """The group agents run in: the one named, else the swarm's own (None: none)."""
        if self.group == NO_GROUP:
            return None
        return self.group or own_group(self.run_id)

    def set_group(self) -> None:
        """`actors group set` once per swarm: its own group (limit `parallel`, default the
        number of workers), or a named one when a limit was given for it."""
        group = self.group_name
        if group is None or (self.group and not self.parallel):
            return
        marker = self.state_dir / "backlog" / "group.set"
        with file_lock(self.setup_lock):
            if marker.exists():
                return
            limit = str(self.parallel or self.workers)
            code, problem = run_command(
                ["actors", "group", "set", group, "--parallel", limit],
                self.state_dir,
                self.logs / "group.log",
                dict(os.environ),
                None,
            )
            if problem or code != 0:
                why = problem or tail(self.logs / "group.log")
                raise WorkerError(f"cannot set up group {group}: {why}")
            marker.write_text(f"{group} {limit}\n", encoding="utf-8")

    def in_group(self, argv: list[str]) -> list[str]:
        """`argv`, started only when a slot of the swarm's group is free (FIFO)."""
        group = self.group_name
        return argv if group is None else ["actors", "group", "run", group, "--", *argv]

    def watched_peers(self) -> dict[str, tuple[int, int]]:
        """The processes of the workers still in the swarm, as they joined it."""
        return {
            name: (int(info["pid"]), int(info["ticks"]))
            for name, info in self.claims.peers(self.name).items()
            if info.get("pid") and info.get("ticks") is not None
        }

    def bury(self, peer: str) -> None:
        """A peer's process ended without leaving the swarm (killed, out of memory): it
        leaves now, as this worker saw it. Its worktree is removed (its branch stays),
        the coordinator is told, and a swarm that this drains finishes; without it, a
        swarm with one dead worker would wait for it for ever."""
        info = self.claims.peers(self.name).get(peer)
        if info is None:
            return  # it left the swarm itself (finished or stopped) before it ended
        why = "its process ended without leaving the swarm"
        departure = self.claims.leave(peer, why)
        if not departure.left:
            return  # another worker saw it first
        self.say(f"{peer}: {why}")
        lost = Worktree(self.tree.repo, Path(info["worktree"]), str(info["branch"]), self.base)
        lost.remove(self.setup_lock)
        post("actor.leave", {"worker": peer, "error": why}, f"{peer} is gone ({why})")
        self.tell_broken(why, peer, str(info["branch"]))
        if departure.drained:
            self.drained()

    def settings(self) -> SwarmSettings:
        group = "" if self.group in ("", NO_GROUP) else self.group
        return SwarmSettings(
            self.run_id, self.tree.repo, self.base, self.keep_alive, self.task_timeout, group
        )

    def drained(self) -> None:
        """This worker drained the swarm: kept alive, the coordinator is told; else every
        worker still here (this one too) gets a `swarm.finish`, behind what its inbox
        already holds."""
        if self.keep_alive:
            self.tell_drained()
            return
        state = self.claims.snapshot()["workers"]
        present = [w for w in roster(self.workers) if state.get(w, {}).get("state") != "gone"]
        for problem in tell_workers(self.run_id, present, FINISH):
            self.say(f"could not tell {problem}")

    def tell_drained(self) -> None:
        """One `swarm.drained` follow-up (and room message) with the summary; the whole
        summary in `backlog/summary.json`."""
        summary = summarize(self.claims.snapshot(), self.settings())
        path = self.state_dir / "backlog" / "summary.json"
        write_summary(path, summary)
        body = message_body(summary, path)
        line = f"{headline(summary)}; next: actors result {self.run_id}"
        # the follow-up first: once the room shows the drain, the coordinator has it
        follow_up("swarm.drained", body, line, level="warning" if summary["failed"] else "info")
        post("swarm.drained", body, line)
        self.say(line)

    def leave(self, error: str | None = None, *, may_drain: bool = True) -> None:
        """Gone for good: the worktree removed (the branch stays, unless this worker made
        it and it never moved), the roster told; the last one out of a finishing swarm
        sends its summary. A stopped worker (`may_drain` False) never drains it."""
        if not self.joined:
            return
        self.joined = False
        self.tree.remove(self.setup_lock, drop_branch_at=self.start)
        departure = self.claims.leave(self.name, error, may_drain=may_drain)
        post("actor.leave", {"worker": self.name, "error": error}, f"{self.name} leaves")
        if error is not None and may_drain and not departure.last:
            self.tell_broken(error, self.name, self.git_branch)
        if departure.drained:
            self.drained()
        if departure.last and departure.finishing:
            self.tell_drained()
        if departure.last:
            self.drop_group()

    def drop_group(self) -> None:
        """The last one out forgets the swarm's own group (a named one stays)."""
        if self.group or not (self.state_dir / "backlog" / "group.set").exists():
            return
        log, group = self.logs / "group.log", own_group(self.run_id)
        code, problem = run_command(
            ["actors", "group", "rm", group],
            self.state_dir,
            log,
            dict(os.environ),
            None,
        )
        if problem or code != 0:
            self.say(f"could not remove group {group}: {problem or tail(log)}")

    def tell_broken(self, error: str, worker: str, branch: str) -> None:
        """One `worker.failed` follow-up: `worker` stopped on an error (or its process
        ended) and the swarm goes on without it (the run's own end says it when it was
        the last one)."""
        summary = f"Run {self.run_id}: worker {worker} stopped: {' '.join(error.split())}"
        tail_ = "; the others go on; next: actors result " + self.run_id
        body = {"run": self.run_id, "worker": worker, "branch": branch, "error": error}
        follow_up("worker.failed", body, summary[: 500 - len(tail_)] + tail_)

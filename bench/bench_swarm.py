"""A backlog swarm at scale: wall time, peak processes, peak PSS, agents at once.

`python -m bench.bench_swarm [--quick] [--workers N] [--items M] [--parallel P]` (`python
-m bench swarm`): a `backlog-implementers` swarm of N workers (default 40; 10 with
--quick) over M items (default 80; 20) in a throw-away git repository, whose agents run
in the swarm's own group of P slots (default 4; 2), then the same swarm without a group
(`group=none`) for comparison. Each stand-in agent writes a file, sleeps 0.2 s and
commits, recording its own start and end. Printed per swarm:

- wall time from spawn to the run's end (it ends by itself once drained);
- agents at once: the most whose recorded lives overlapped, and the most live agent
  processes /proc showed (sampled every 20 ms);
- peak processes of the run's session and their peak total PSS (smaps_rollup: shared
  pages split fairly);
- that each item was done once and one `swarm.drained` came, and what was left running.

`tests/integration/test_swarm_scale.py` runs the same measurement (`Sampler`,
`most_at_once`, `AGENT`) and holds its figures to the limit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench._stats import emit

AGENT = """#!/bin/sh
# a stand-in agent: its start and end (with its pid) in MARKS, one committed file
for item; do :; done
marks=$1
echo "start $(date +%s.%N)" > "$marks/$$"
name=$(printf %s "$item" | tr -c 'A-Za-z0-9' _)
echo "$item" > "work-$name.txt"
sleep "$2"
git add -A && git commit -qm "agent: $item"
echo "end $(date +%s.%N)" >> "$marks/$$"
"""


def most_at_once(marks: Path) -> tuple[int, int]:
    """(the most agents whose recorded lives overlapped, how many agents ran); an agent
    that did not record its end is an error (it must have finished)."""
    edges: list[tuple[float, int]] = []
    lives = 0
    for mark in marks.iterdir():
        times = dict(line.split() for line in mark.read_text().splitlines())
        if set(times) != {"start", "end"}:
            raise AssertionError(f"agent {mark.name} did not finish: {times}")
        edges += [(float(times["start"]), 1), (float(times["end"]), -1)]
        lives += 1
    alive = peak = 0
    for _, step in sorted(edges):  # at one instant an end (-1) sorts before a start
        alive += step
        peak = max(peak, alive)
    return peak, lives


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[3]) == sid and stat[0] not in ("Z", "X"):
                pids.append(int(entry))
    return pids


class Sampler:
    """/proc, sampled every 20 ms while in use: the most live agent processes (each
    `sh AGENT`, not the forks its shell makes for git), the most processes of session
    `sid` and their most total PSS (kB)."""

    def __init__(self, agent: Path, sid: int) -> None:
        self.agent, self.sid = str(agent).encode(), sid
        self.agents = self.processes = self.pss_kb = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def sample(self) -> None:
        members = _session_pids(self.sid)
        agents: dict[int, int] = {}
        pss = 0
        for pid in members:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(argv) > 1 and argv[1] == self.agent:
                agents[pid] = int(stat[1])
            found = re.search(r"^Pss:\s+(\d+)", rollup, re.M)
            pss += int(found.group(1)) if found else 0
        shells = [pid for pid, parent in agents.items() if parent not in agents]
        self.agents = max(self.agents, len(shells))
        self.processes = max(self.processes, len(members))
        self.pss_kb = max(self.pss_kb, pss)

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.sample()

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def _repo(work: Path) -> Path:
    repo = work / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("bench\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial")
    return repo


def swarm(work: Path, workers: int, items: int, parallel: int) -> dict[str, Any]:
    """Run one swarm to its end; its figures. `parallel` 0: no group."""
    import actors
    from runtime.store.layout import StateRoot
    from runtime.views.status import load_run

    tag = f"{workers}w-{items}i-{parallel}p"
    base = work / tag
    base.mkdir()
    repo, marks, agent = _repo(base), base / "marks", base / "agent.sh"
    marks.mkdir()
    agent.write_text(AGENT)
    agent.chmod(0o700)
    (base / "backlog.md").write_text("".join(f"- [ ] item {n}\n" for n in range(items)))
    values: dict[str, Any] = {
        "backlog": str(base / "backlog.md"),
        "repo": str(repo),
        "agent_cmd": f"{agent} {marks} 0.2",
        "base": "main",
        "workers": workers,
        "group": "" if parallel else "none",
        "parallel": parallel,
    }
    started = time.monotonic()
    record = actors.spawn("backlog-implementers", values=values)
    run = record["run"]
    sid = int(load_run(StateRoot.from_env().run(run))["process_identity"]["sid"])
    try:
        with Sampler(agent, sid) as sampler:
            final = actors.wait(run, timeout=1800)
        wall = time.monotonic() - started
    finally:
        if actors.status(run)["status"] not in ("done", "failed", "cancelled", "killed"):
            subprocess.run([sys.executable, "-m", "actors", "kill", run], check=False)
    overlapped, lives = most_at_once(marks)
    messages = actors.inspect(f"room:{run}", "messages", lines=2000)["messages"]
    claimed = sorted(m["body"]["index"] for m in messages if m["type"] == "task.claim")
    drains = sum(1 for m in messages if m["type"] == "swarm.drained")
    return {
        "swarm": tag,
        "status": final["status"],
        "wall_s": wall,
        "agents_overlapped": overlapped,
        "agents_sampled": sampler.agents,
        "agents_ran": lives,
        "peak_processes": sampler.processes,
        "peak_pss_mb": sampler.pss_kb / 1024,
        "each_item_once": claimed == list(range(1, items + 1)),
        "drained": drains,
        "left_running": len(_session_pids(sid)),
    }


def _line(figures: dict[str, Any]) -> str:
    return (
        f"swarm {figures['swarm']:<14} {figures['status']:<5} wall {figures['wall_s']:6.1f} s"
        f"  agents at once {figures['agents_overlapped']:>2} (sampled {figures['agents_sampled']:>2})"
        f"  peak {figures['peak_processes']:>3} processes, PSS {figures['peak_pss_mb']:6.0f} MB"
        f"  each item once: {figures['each_item_once']}, drained {figures['drained']}x,"
        f" left running {figures['left_running']}"
    )


def _option(name: str, default: int) -> int:
    if name in sys.argv:
        try:
            return int(sys.argv[sys.argv.index(name) + 1])
        except (IndexError, ValueError):
            print(f"bench_swarm: {name} needs a whole number", file=sys.stderr)
            raise SystemExit(2) from None
    return default


def main(quick: bool) -> None:
    workers = _option("--workers", 10 if quick else 40)
    items = _option("--items", 20 if quick else 80)
    parallel = _option("--parallel", 2 if quick else 4)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        saved = {k: os.environ.get(k) for k in ("ACTORS_HOME", "GIT_CONFIG_GLOBAL")}
        os.environ.update(
            ACTORS_HOME=str(work / "state"),
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_AUTHOR_NAME="bench",
            GIT_AUTHOR_EMAIL="bench@example.invalid",
            GIT_COMMITTER_NAME="bench",
            GIT_COMMITTER_EMAIL="bench@example.invalid",
        )
        emit(f"state root: {work / 'state'} (removed on exit)")
        try:
            for limit in dict.fromkeys((parallel, 0)):  # the group's swarm, then none
                figures = swarm(work, workers, items, limit)
                emit(_line(figures))
                emit("  " + json.dumps(figures))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


if __name__ == "__main__":
    main("--quick" in sys.argv)

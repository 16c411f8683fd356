"""A swarm the machine can hold: its agents run inside the swarm's group, so no more of
them are alive at once than the group's parallel limit, however many workers it has.

Each stand-in agent records when it started and ended (its own pid in the name) and
commits one file; the test also samples /proc for live agent processes and for the
PSS of every process of the run, and counts what is left when it ends (the measurement
is bench/bench_swarm.py's, which prints the same figures). The small test runs in the
default tier; the 40-worker, 80-item one is `slow` (.ci/run's soak tier).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

import actors
from bench.bench_swarm import AGENT, Sampler, most_at_once
from runtime.core.process import session_members
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.views.status import load_run
from tests.conftest import cli, finished
from tests.integration.test_backlog_swarm import git, repo  # noqa: F401  (repo: the fixture)


def groups_available() -> bool:
    """The capacity half of issue 28 (`actors group set` / `actors group run`)."""
    return cli("group", "--help").returncode == 0


needs_groups = pytest.mark.skipif(
    not groups_available(),
    reason="needs `actors group set` / `actors group run` (issue 28's capacity half)",
)


def run_swarm(
    home: StateRoot, tmp_path: Path, at: Path, items: int, workers: int, parallel: int
) -> tuple[dict[str, Any], Sampler, float]:
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o700)
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "backlog.md").write_text("".join(f"- [ ] item {n}\n" for n in range(items)))
    started = time.monotonic()
    record = actors.spawn(
        "backlog-implementers",
        values={
            "backlog": str(tmp_path / "backlog.md"),
            "repo": str(at),
            "agent_cmd": f"{agent} {marks} 0.2",
            "base": "main",
            "workers": workers,
            "group": "",  # the swarm's own group, swarm-<run>
            "parallel": parallel,
        },
    )
    sid = int(load_run(home.run(record["run"]))["process_identity"]["sid"])
    with Sampler(agent, sid) as sampler:
        final = finished(record, timeout=900)
    wall = time.monotonic() - started
    assert final["status"] == "done", final
    assert session_members(sid) == {}  # nothing of the run is left running
    return record, sampler, wall


def check_swarm(home: StateRoot, record: dict[str, Any], at: Path, items: int) -> None:
    run = record["run"]
    messages = actors.inspect(f"room:{run}", "messages", lines=2000)["messages"]
    claims = [m["body"] for m in messages if m["type"] == "task.claim"]
    assert sorted(c["index"] for c in claims) == list(range(1, items + 1))  # each once
    done = [m["body"] for m in messages if m["type"] == "task.result" and m["body"]["ok"]]
    assert sorted(r["item"] for r in done) == sorted(f"item {n}" for n in range(items))
    told = [e["envelope"] for e in SessionInbox(session_paths(home, record["owner_id"])).entries()]
    drained = [t for t in told if t["type"] == "swarm.drained"]
    assert len(drained) == 1, [t["type"] for t in told]
    assert (drained[0]["body"]["done"], drained[0]["body"]["failed"]) == (items, 0)
    landed = sum(
        len(b["commits"]) + b.get("commits_omitted", 0) for b in drained[0]["body"]["branches"]
    )
    assert landed == items  # one commit per item, on the branch of the worker that did it
    listed = git(at, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1, listed


@needs_groups
def test_agents_run_inside_the_swarms_group(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    record, sampler, _ = run_swarm(home, tmp_path, repo, items=6, workers=3, parallel=1)
    peak, lives = most_at_once(tmp_path / "marks")
    assert (peak, lives) == (1, 6), (peak, lives)  # one slot: one agent at a time
    assert sampler.agents <= 1, sampler.agents
    check_swarm(home, record, repo, 6)


@pytest.mark.slow
@needs_groups
def test_forty_workers_over_eighty_items_run_four_agents_at_a_time(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    record, sampler, wall = run_swarm(home, tmp_path, repo, items=80, workers=40, parallel=4)
    peak, lives = most_at_once(tmp_path / "marks")
    assert lives == 80, lives
    assert peak == 4, peak  # the limit is reached, and never passed
    assert 1 <= sampler.agents <= 4, sampler.agents
    check_swarm(home, record, repo, 80)
    # bounded: 40 idle workers each hold one Python process and one blocked `actors`
    # (recv, or group run waiting for a slot); measured ~0.9 GB PSS at peak
    assert sampler.pss_kb < 40 * 48 * 1024, sampler.pss_kb
    assert sampler.processes < 40 * 4, sampler.processes
    print(
        f"40 workers, 80 items, 4 slots: {wall:.1f} s wall, peak {sampler.processes}"
        f" processes, peak PSS {sampler.pss_kb / 1024:.0f} MB",
        file=sys.stderr,
    )

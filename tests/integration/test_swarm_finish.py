"""A backlog swarm that finishes: one `swarm.drained` follow-up with what to merge and
what to retry, the run ending `done` by itself, nothing left in the repository but the
branches; N workers claiming in the documented order, each with its own agent; the same
per-task table from `actors result`, running, drained or stopped; retry commands that
work when pasted into a shell.

The agent is a stand-in script that writes a file named after its item (README.md for
an item about the readme), held at a FIFO gate where a test needs a worker busy, and
failing while `<gates>/<item>.blocked` exists. Every wait is on a condition (the room's
doorbell, a FIFO, the run's end), never a sleep.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, finished, runner_at_rest
from tests.integration.test_backlog_swarm import (  # noqa: F401  (repo: the fixture)
    gates,
    git,
    repo,
    results,
    slug,
    wait_room,
)

AGENT = """
import os, pathlib, re, sys
gates, item = pathlib.Path(sys.argv[1]), sys.argv[-1]
slug = re.sub(r"[^a-z0-9]+", "-", item.lower()).strip("-")
gate = gates / f"{slug}.fifo"
if gate.exists():  # held until the test opens it
    with open(gate) as held:
        held.readline()
if (gates / f"{slug}.blocked").exists():
    sys.exit(f"{item} is blocked")
target = "README.md" if "readme" in item else f"{slug}.txt"
pathlib.Path(target).write_text(f"{item} by {os.environ.get('AGENT_NAME', 'agent')}\\n")
print(f"implemented {item}")
"""


def agent(tmp_path: Path, name: str = "agent") -> str:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    (tmp_path / "gates").mkdir(exist_ok=True)
    return shlex.join(
        ["env", f"AGENT_NAME={name}", sys.executable, str(script), str(tmp_path / "gates")]
    )


def spawn(tmp_path: Path, at: Path, items: list[str], **values: Any) -> dict[str, Any]:
    (tmp_path / "backlog.md").write_text("".join(f"- [ ] {item}\n" for item in items))
    given = {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(at),
        "agent_cmd": agent(tmp_path),
        "base": "main",
        **values,
    }
    return actors.spawn("backlog-implementers", values=given)


def followups(home: StateRoot, record: dict[str, Any]) -> list[dict[str, Any]]:
    entries = SessionInbox(session_paths(home, record["owner_id"])).entries()
    return [e["envelope"] for e in entries]


def worktrees(at: Path) -> list[str]:
    listed = git(at, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listed.splitlines() if line.startswith("worktree ")]


def prunable(at: Path) -> str:
    return subprocess.run(
        ["git", "worktree", "prune", "--dry-run", "--verbose"],
        cwd=at,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_a_drained_swarm_says_so_once_with_its_branches_and_ends_done(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    items = ["edit the readme", "item two", "flaky item", "item four"]
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "flaky-item.blocked").write_text("")
    with gates(tmp_path / "gates", "edit the readme") as held:
        record = spawn(tmp_path, repo, items)
        run = record["run"]
        # front holds the readme item while main moves on under it: its branch will not
        # merge cleanly any more, back's will
        wait_room(home, run, lambda ms: any(m["type"] == "task.claim" for m in ms))
        (repo / "README.md").write_text("changed on main meanwhile\n")
        git(repo, "commit", "-qam", "main moves on")
        wait_room(home, run, lambda ms: len(results(ms)) == 3)
        os.write(held["edit the readme"], b"go\n")
        final = finished(record)
    assert final["status"] == "done" and not final.get("degraded"), final

    told = followups(home, record)
    assert [t["type"] for t in told] == ["task.failed", "swarm.drained", "run.done"]
    drained = told[1]
    assert drained["from"].startswith(f"branch:{run}/")
    body = drained["body"]
    assert drained["summary"] == (
        f"Run {run} drained: 3 done, 1 failed; 2 branches to merge (1 conflict with main);"
        f" next: actors result {run}"
    )
    assert (body["run"], body["done"], body["failed"], body["left"]) == (run, 3, 1, 0)
    branches = {b["worker"]: b for b in body["branches"]}
    assert set(branches) == {"front", "back"}
    assert branches["front"]["merges_cleanly"] is False
    assert [c["subject"] for c in branches["front"]["commits"]] == ["edit the readme"]
    assert branches["back"]["merges_cleanly"] is True
    assert sorted(c["subject"] for c in branches["back"]["commits"]) == ["item four", "item two"]
    for branch in branches.values():  # each listed commit is on its branch, head last
        assert branch["commits"][-1]["commit"] == git(repo, "rev-parse", branch["branch"])
    (failed,) = body["failed_items"]
    assert failed["item"] == "flaky item" and "flaky item is blocked" in failed["reason"]
    assert failed["retry"].startswith("actors spawn backlog-implementers ")
    # the run's own end names the same summary as its result
    assert told[2]["body"]["result"]["type"] == "swarm.drained"

    # Nothing is left in the repository but the branches: no worktree, nothing to prune.
    assert worktrees(repo) == [str(repo)]
    assert prunable(repo) == ""
    assert not (Path(record["state_dir"]) / "worktrees" / "front").exists()
    assert git(
        repo, "branch", "--list", f"actors/{run}/*", "--format=%(refname:short)"
    ).split() == [
        f"actors/{run}/back",
        f"actors/{run}/front",
    ]
    summary = json.loads(Path(body["summary_file"]).read_text())
    assert [t["state"] for t in summary["tasks"]].count("done") == 3

    # `actors result` shows the per-task table and the drained line.
    shown = cli("result", run)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith("    ")]
    assert rows[0] == ["#", "worker", "state", "commit", "item"]
    assert sorted(r[2] for r in rows[1:]) == ["done", "done", "done", "failed"]
    assert "  tasks    3 done, 1 failed" in shown.stdout
    assert f"  drained  Run {run} drained: 3 done, 1 failed" in shown.stdout

    # The clean branch merges as the follow-up says.
    merged = subprocess.run(
        ["sh", "-c", branches["back"]["merge"] + " -q --no-edit"], capture_output=True, text=True
    )
    assert merged.returncode == 0, merged.stderr
    assert (repo / "item-two.txt").read_text() == "item two by agent\n"

    # The failed item's retry, pasted into a shell once its cause is gone, does it.
    (tmp_path / "gates" / "flaky-item.blocked").unlink()
    again = subprocess.run(["sh", "-c", failed["retry"]], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    retried = again.stdout.strip().removeprefix("run:")
    second = finished(actors.status(retried))
    assert second["status"] == "done", second
    (result,) = [
        m["body"]
        for m in actors.inspect(f"room:{retried}", "messages")["messages"]
        if m["type"] == "task.result"
    ]
    assert result["ok"] and result["item"] == "flaky item" and result["worker"] == "w1"
    assert git(repo, "show", f"actors/{retried}/w1:flaky-item.txt") == "flaky item by agent"
    assert worktrees(repo) == [str(repo)]


def test_result_shows_the_table_of_a_running_and_of_a_stopped_swarm(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    with gates(tmp_path / "gates", "held item"):
        record = spawn(tmp_path, repo, ["held item", "quick item"])
        run = record["run"]
        wait_room(
            home,
            run,
            lambda ms: (
                len(results(ms)) == 1
                and any(m["type"] == "task.claim" and m["body"]["item"] == "held item" for m in ms)
            ),
        )
        running = cli("result", run)
        assert running.returncode == 0, running.stderr
        assert running.stdout.startswith(f"run:{run}  running")
        assert (
            "  tasks    1 working, 1 done" in running.stdout
            or "  tasks    1 done, 1 working" in running.stdout
        )
        table = json.loads(cli("result", run, "--json").stdout)
        assert table["status"] == "running"
        states = {t["item"]: t["state"] for t in table["tasks"]}
        assert states == {"held item": "working", "quick item": "done"}
        assert table["drained"] is None

        stopped = cli("message", f"run:{run}", "control.stop")
        assert stopped.returncode == 0, stopped.stderr
        final = finished(record)
    assert final["status"] == "cancelled", final
    shown = json.loads(cli("result", run, "--json").stdout)
    assert {t["item"]: t["state"] for t in shown["tasks"]} == {
        "held item": "interrupted",
        "quick item": "done",
    }
    assert shown["drained"] is None  # a stop is not a finish
    assert "swarm.drained" not in [t["type"] for t in followups(home, record)]
    # each stopped worker removed its worktree on the way out; the branches stay
    assert worktrees(repo) == [str(repo)] and prunable(repo) == ""
    quick = next(t for t in shown["tasks"] if t["item"] == "quick item")
    assert git(repo, "show", f"{quick['commit']}:quick-item.txt") == "quick item by agent"


def test_four_workers_claim_in_order_with_their_own_agents_each_item_once(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    items = [f"item {n}" for n in range(1, 9)]
    record = spawn(
        tmp_path,
        repo,
        items,
        workers=4,
        agent_cmds=json.dumps([agent(tmp_path, "alpha"), agent(tmp_path, "beta")]),
        agent_cmd="",
    )
    run = record["run"]
    final = finished(record)
    assert final["status"] == "done", final
    messages = actors.inspect(f"room:{run}", "messages", lines=1000)["messages"]
    claims = [m["body"] for m in messages if m["type"] == "task.claim"]
    assert sorted(c["index"] for c in claims) == list(range(1, 9))  # each exactly once
    by_worker: dict[str, list[int]] = {}
    for claim in claims:
        by_worker.setdefault(claim["worker"], []).append(claim["index"])
    assert set(by_worker) <= {"w1", "w2", "w3", "w4"}
    top = [i for w in ("w1", "w3") for i in by_worker.get(w, [])]
    bottom = [i for w in ("w2", "w4") for i in by_worker.get(w, [])]
    for worker, indexes in by_worker.items():
        ordered = sorted(indexes) if worker in ("w1", "w3") else sorted(indexes, reverse=True)
        assert indexes == ordered, (worker, indexes)
    if top and bottom:
        assert max(top) < min(bottom)  # the two ends meet in the middle, never cross
    for result in [m["body"] for m in messages if m["type"] == "task.result"]:
        assert result["ok"], result
        expected = "alpha" if result["worker"] in ("w1", "w3") else "beta"
        assert git(repo, "show", f"{result['commit']}:{slug(result['item'])}.txt") == (
            f"{result['item']} by {expected}"
        )
    (drained,) = [t for t in followups(home, record) if t["type"] == "swarm.drained"]
    assert (drained["body"]["done"], drained["body"]["failed"]) == (8, 0)
    listed = {b["branch"] for b in drained["body"]["branches"]}
    assert listed == {f"actors/{run}/{w}" for w in by_worker}
    # a worker that never got an item leaves no branch behind
    kept = git(repo, "branch", "--list", f"actors/{run}/*", "--format=%(refname:short)").split()
    assert set(kept) == listed
    assert worktrees(repo) == [str(repo)] and prunable(repo) == ""


def test_a_kept_alive_swarm_parks_once_drained_and_its_retries_work_when_pasted(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "flaky-item.blocked").write_text("")
    record = spawn(tmp_path, repo, ["flaky item", "solid item"], keep_alive="true")
    run = record["run"]
    wait_room(home, run, lambda ms: any(m["type"] == "swarm.drained" for m in ms))
    told = followups(home, record)
    assert [t["type"] for t in told] == ["task.failed", "swarm.drained"]
    failure, drained = told
    assert drained["body"]["kept_alive"] is True
    # a kept-alive swarm's retry goes to the worker that failed it, as task.failed says
    assert drained["body"]["failed_items"][0]["retry"] == failure["body"]["retry"]
    assert failure["body"]["retry"].endswith(" --body-json")
    assert actors.status(run)["status"] == "running"
    runner_at_rest(home, record)  # drained and waiting: the runner parks

    # Pasted into a shell, the retry gives the worker the item (not its JSON text).
    (tmp_path / "gates" / "flaky-item.blocked").unlink()
    pasted = subprocess.run(["sh", "-c", failure["body"]["retry"]], capture_output=True, text=True)
    assert pasted.returncode == 0, pasted.stderr
    messages = wait_room(
        home, run, lambda ms: len([m for m in ms if m["type"] == "swarm.drained"]) == 2
    )
    retried = results(messages)[-1]
    assert retried["ok"] and retried["item"] == "flaky item" and retried["source"] == "assignment"
    claim = [m for m in messages if m["type"] == "task.claim"][-1]
    assert claim["summary"] == f"{failure['body']['worker']} claims assignment: flaky item"
    second = [m["body"] for m in messages if m["type"] == "swarm.drained"][-1]
    assert (second["drain"], second["done"], second["failed"]) == (2, 2, 1)

    # An agent that cannot start is said once, not twice.
    sent = cli(
        "message",
        f"branch:{run}/front",
        "task.assign",
        json.dumps({"item": "one more", "agent_cmd": "no-such-agent-here"}),
        "--body-json",
    )
    assert sent.returncode == 0, sent.stderr
    messages = wait_room(home, run, lambda ms: len(results(ms)) == 4)
    assert results(messages)[-1]["reason"] == (
        "agent cannot start 'no-such-agent-here': not found on PATH"
    )
    stop = cli("message", f"run:{run}", "control.stop")
    assert stop.returncode == 0, stop.stderr
    assert finished(record)["status"] == "cancelled"
    assert worktrees(repo) == [str(repo)] and prunable(repo) == ""


async def test_through_the_mcp_tools_the_drained_swarm_is_one_follow_up_and_one_table(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    """An agent's view: spawn through the MCP tool, the one `swarm.drained` among its
    follow-ups (inbox_read), the per-task table through `inspect room:RUN --view tasks`."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    (tmp_path / "gates").mkdir()
    (tmp_path / "gates" / "flaky-item.blocked").write_text("")
    (tmp_path / "backlog.md").write_text("- [ ] flaky item\n- [ ] solid item\n")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors", "mcp", "--session", "coord-mcp"],
        env=dict(os.environ),
    )
    values = {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(repo),
        "agent_cmd": agent(tmp_path),
        "base": "main",
    }
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = await session.call_tool(
            "spawn", {"recipe": "backlog-implementers", "values": values}
        )
        assert not started.is_error, started.content[0].text
        run = started.structured_content["run"]
        final = finished(actors.status(run))
        assert final["status"] == "done", final
        inbox = await session.call_tool("inbox_read", {"bodies": True})
        shown = inbox.structured_content["followups"]
        assert [f["type"] for f in shown] == ["task.failed", "swarm.drained", "run.done"]
        drained = shown[1]
        assert drained["summary"].startswith(f"Run {run} drained: 1 done, 1 failed; 1 branch")
        assert drained["body"]["failed_items"][0]["item"] == "flaky item"
        (branch,) = drained["body"]["branches"]
        assert branch["merges_cleanly"] is True
        assert git(repo, "rev-parse", branch["branch"]) == branch["head"]
        view = await session.call_tool(
            "inspect", {"target": f"room:{run}", "view": "tasks", "verbose": True}
        )
        assert not view.is_error, view.content[0].text
        tasks = view.structured_content["tasks"]
        assert sorted((t["item"], t["state"]) for t in tasks) == [
            ("flaky item", "failed"),
            ("solid item", "done"),
        ]
        assert view.structured_content["drained"]["done"] == 1


HOSTILE = "hostile $(touch PWNED) '; touch PWNED2; ' `touch PWNED3` \x1b[31mred\x1b[0m"


def test_a_hostile_item_stays_text_in_retries_and_tables(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    """An item is data everywhere it goes: its retry commands, pasted into a shell, run
    nothing it says and give back the same text; the table shows its escape codes inert."""
    (tmp_path / "gates").mkdir()
    blocked = tmp_path / "gates" / f"{slug(HOSTILE)}.blocked"
    blocked.write_text("")
    record = spawn(tmp_path, repo, [HOSTILE], workers=1)
    run = record["run"]
    assert finished(record)["status"] == "done"
    told = followups(home, record)
    assert [t["type"] for t in told] == ["task.failed", "swarm.drained", "run.done"]
    assign = told[0]["body"]["retry"]
    assert shlex.split(assign) == [
        "actors",
        "message",
        f"branch:{run}/w1",
        "task.assign",
        json.dumps({"item": HOSTILE}),
        "--body-json",
    ]
    shown = cli("result", run)
    assert shown.returncode == 0 and "\x1b" not in shown.stdout, shown.stdout
    assert "\\x1b[31mred" in shown.stdout  # shown, inert

    blocked.unlink()
    (retry,) = [f["retry"] for f in told[1]["body"]["failed_items"]]
    pasted = subprocess.run(["sh", "-c", retry], capture_output=True, text=True, cwd=tmp_path)
    assert pasted.returncode == 0, pasted.stderr
    again = pasted.stdout.strip().removeprefix("run:")
    assert finished(actors.status(again))["status"] == "done"
    (result,) = [
        m["body"]
        for m in actors.inspect(f"room:{again}", "messages")["messages"]
        if m["type"] == "task.result"
    ]
    assert result["ok"] and result["item"] == HOSTILE
    for where in (tmp_path, repo, Path.cwd()):
        assert not list(where.glob("PWNED*")), where


def test_a_worker_killed_mid_task_does_not_hold_the_swarm_for_ever(
    home: StateRoot,
    tmp_path: Path,
    repo: Path,  # noqa: F811
) -> None:
    """front is SIGKILLed while its agent works (an OOM kill, say): back, idle, sees its
    process end, buries it (its worktree removed, the coordinator told) and the swarm
    drains without it; the item it had is listed as interrupted, with a retry."""
    with gates(tmp_path / "gates", "held item"):
        record = spawn(tmp_path, repo, ["held item", "item two", "item three"])
        run = record["run"]
        wait_room(
            home,
            run,
            lambda ms: (
                len(results(ms)) == 2
                and any(m["type"] == "task.awaiting" and m["body"]["idle"] for m in ms)
            ),
        )
        claims = json.loads((Path(record["state_dir"]) / "backlog" / "claims.json").read_text())
        os.kill(int(claims["workers"]["front"]["pid"]), signal.SIGKILL)
        final = finished(record)
    assert final["status"] in ("done", "failed"), final
    told = followups(home, record)
    kinds = [t["type"] for t in told]
    assert kinds.count("swarm.drained") == 1 and kinds.count("worker.failed") == 1, kinds
    (broken,) = [t for t in told if t["type"] == "worker.failed"]
    assert broken["body"]["worker"] == "front" and broken["from"] == f"branch:{run}/back"
    (drained,) = [t["body"] for t in told if t["type"] == "swarm.drained"]
    assert (drained["done"], drained["failed"], drained["interrupted"]) == (2, 0, 1)
    (lost,) = drained["interrupted_items"]
    assert lost["item"] == "held item" and lost["worker"] == "front"
    assert lost["reason"] == "its process ended without leaving the swarm"
    assert lost["retry"].startswith("actors spawn backlog-implementers ")
    assert "agent_cmd=env AGENT_NAME=agent" in lost["retry"]
    assert drained["workers"]["front"]["state"] == "gone"
    assert worktrees(repo) == [str(repo)] and prunable(repo) == ""
    shown = json.loads(cli("result", run, "--json").stdout)
    assert {t["item"]: t["state"] for t in shown["tasks"]}["held item"] == "interrupted"

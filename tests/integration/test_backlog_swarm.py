"""The backlog-implementers recipe kept alive: two persistent workers on one git repository.

A scripted stand-in agent edits a file named after its item (and, for some items, commits
itself); the workers claim from opposite ends of the backlog, report to the run's room,
take a coordinator assignment, and die with the run on control.kill (`keep_alive`: a
drained swarm waits for more work; tests/integration/test_swarm_finish.py has the swarm
that ends by itself). Everything waits on conditions (the room's doorbell, FIFO gates,
pidfds), never on sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.core.process import session_members
from runtime.delivery.sessions import SessionInbox
from runtime.messaging.doorbells import doorbell
from runtime.store.layout import StateRoot, session_paths
from runtime.views.status import TERMINAL, load_run
from tests.conftest import alive, cli, finished, make_fifo, wait_for_change

AGENT = """
import pathlib, re, subprocess, sys
gates, item = pathlib.Path(sys.argv[1]), sys.argv[-1]
slug = re.sub(r"[^a-z0-9]+", "-", item.lower()).strip("-")
gate = gates / f"{slug}.fifo"
if gate.exists():  # held until the test opens it
    with open(gate) as held:
        held.readline()
pathlib.Path(f"{slug}.txt").write_text(item + "\\n")
if "agent commits" in item:
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"agent: {item}"], check=True)
print(f"implemented {item}")
"""

VALIDATE = """
import os, pathlib, re, sys
slug = re.sub(r"[^a-z0-9]+", "-", os.environ["BACKLOG_ITEM"].lower()).strip("-")
sys.exit(0 if pathlib.Path(f"{slug}.txt").is_file() else 1)
"""

BACKLOG = """# Backlog

- [ ] item one
- [x] already done
- [ ] item two
- [ ] item three (agent commits)
- [ ] item four (agent commits)
- [ ] item five
- [ ] item six
"""
ITEMS = [
    "item one",
    "item two",
    "item three (agent commits)",
    "item four (agent commits)",
    "item five",
    "item six",
]


def slug(item: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", item.lower()).strip("-")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with one commit; git sees no global or system config."""
    for name, value in {
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.invalid",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    }.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("demo\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def room(run: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = actors.inspect(f"room:{run}", "messages", lines=1000)[
        "messages"
    ]
    return messages


def wait_room(
    home: StateRoot,
    run: str,
    done: Callable[[list[dict[str, Any]]], bool],
    timeout: float = 60,
) -> list[dict[str, Any]]:
    """Re-read the room each time its doorbell rings (1 s reconcile) until `done` holds."""
    deadline = time.monotonic() + timeout
    with doorbell(home.run(run).dir / "rooms" / "main" / "doorbells") as bell:
        while True:
            messages = room(run)
            if done(messages):
                return messages
            state = actors.status(run)["status"]
            if state in TERMINAL or time.monotonic() > deadline:
                stderr = "\n".join(actors.tail(run, 30, stream="stderr"))
                seen = "\n".join(f"{m['from']} {m['summary']}" for m in messages)
                raise AssertionError(f"run {run} is {state}; room:\n{seen}\nstderr:\n{stderr}")
            if select.select([bell], [], [], min(1.0, deadline - time.monotonic()))[0]:
                with contextlib.suppress(BlockingIOError):
                    os.read(bell, 4096)


def of(messages: list[dict[str, Any]], run: str, worker: str) -> list[dict[str, Any]]:
    """The worker's task messages (claim, result, awaiting), in order."""
    return [
        m
        for m in messages
        if m["from"] == f"branch:{run}/{worker}" and m["type"].startswith("task.")
    ]


def idle(messages: list[dict[str, Any]], run: str, worker: str) -> bool:
    """The worker's last word is an awaiting with idle=true."""
    mine = of(messages, run, worker)
    return bool(mine) and mine[-1]["type"] == "task.awaiting" and mine[-1]["body"]["idle"]


def results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["body"] for m in messages if m["type"] == "task.result"]


@contextlib.contextmanager
def gates(directory: Path, *items: str) -> Iterator[dict[str, int]]:
    """FIFOs the stand-in agent blocks on; held open read-write, so a line written before
    the agent opens its end waits in the pipe."""
    directory.mkdir(exist_ok=True)
    fds = {}
    try:
        for item in items:
            fds[item] = os.open(make_fifo(directory / f"{slug(item)}.fifo"), os.O_RDWR)
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def spawn_swarm(tmp_path: Path, repo: Path, backlog: str | bytes, **values: str) -> dict[str, Any]:
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "validate.py").write_text(VALIDATE)
    encoded = backlog if isinstance(backlog, bytes) else backlog.encode()
    (tmp_path / "backlog.md").write_bytes(encoded)
    (tmp_path / "gates").mkdir(exist_ok=True)
    defaults = {
        "backlog": str(tmp_path / "backlog.md"),
        "repo": str(repo),
        "agent_cmd": f"{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'gates'}",
        "validate_cmd": f"{sys.executable} {tmp_path / 'validate.py'}",
    }
    return actors.spawn("backlog-implementers", values={**defaults, **values})


def kill_and_reap(record: dict[str, Any], worker_pids: list[int]) -> None:
    """control.kill to the run ends both workers; nothing of the run's session survives."""
    run = record["run"]
    sid = load_run(StateRoot.from_env().run(run))["process_identity"]["sid"]
    sent = cli("message", f"run:{run}", "control.kill")
    assert sent.returncode == 0, sent.stderr
    final = finished(record)
    assert final["status"] == "killed" and final["reason"] == "control.kill"
    assert not [pid for pid in worker_pids if alive(pid)]
    assert session_members(sid) == {}


def test_two_workers_drain_the_backlog_from_both_ends_then_take_an_assignment(
    home: StateRoot, tmp_path: Path, repo: Path
) -> None:
    started = time.monotonic()
    with gates(tmp_path / "gates", "item one", "item six") as held:
        record = spawn_swarm(tmp_path, repo, BACKLOG, keep_alive="true")
        run = record["run"]

        # Both first claims are posted while each agent is held at its gate, so neither
        # worker can run ahead and take the other's end.
        def both_claimed(messages: list[dict[str, Any]]) -> bool:
            return all(
                any(m["type"] == "task.claim" for m in of(messages, run, w))
                for w in ("front", "back")
            )

        messages = wait_room(home, run, both_claimed)
        first = {w: of(messages, run, w)[0] for w in ("front", "back")}
        assert first["front"]["type"] == first["back"]["type"] == "task.claim"
        assert (first["front"]["body"]["index"], first["front"]["body"]["item"]) == (1, "item one")
        assert (first["back"]["body"]["index"], first["back"]["body"]["item"]) == (6, "item six")
        for fd in held.values():
            os.write(fd, b"go\n")

        messages = wait_room(
            home,
            run,
            lambda ms: len(results(ms)) == 6 and idle(ms, run, "front") and idle(ms, run, "back"),
        )
    drained = time.monotonic()

    claims = [m["body"] for m in messages if m["type"] == "task.claim"]
    assert sorted(c["index"] for c in claims) == [1, 2, 3, 4, 5, 6]  # each exactly once
    assert sorted(c["item"] for c in claims) == sorted(ITEMS)
    indexes = {w: [c["index"] for c in claims if c["worker"] == w] for w in ("front", "back")}
    assert indexes["front"] == sorted(indexes["front"])  # top down
    assert indexes["back"] == sorted(indexes["back"], reverse=True)  # bottom up
    assert max(indexes["front"]) < min(indexes["back"])

    worker_pids = []
    for worker in ("front", "back"):
        mine = of(messages, run, worker)
        assert [m["type"] for m in mine] == ["task.claim", "task.result", "task.awaiting"] * len(
            indexes[worker]
        )
        awaiting = [m["body"] for m in mine if m["type"] == "task.awaiting"]
        assert [a["idle"] for a in awaiting] == [False] * (len(awaiting) - 1) + [True]
        assert awaiting[-1]["reason"] == "backlog end exhausted"
        assert awaiting[-1]["backlog_left"] == 0
        worker_pids.append(awaiting[-1]["pid"])
        for claim, result, after in zip(mine[::3], mine[1::3], mine[2::3], strict=True):
            assert claim["body"]["task"] == result["body"]["task"] == after["body"]["after"]
        branch = f"actors/{run}/{worker}"
        log = git(repo, "log", "--format=%H %s", branch).splitlines()
        landed = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in log}
        for result in [m["body"] for m in mine if m["type"] == "task.result"]:
            assert result["ok"] and result["branch"] == branch, result
            assert result["commit"] in landed  # the result is a commit on the worker's branch
            expected = (
                f"agent: {result['item']}" if "agent commits" in result["item"] else result["item"]
            )
            assert landed[result["commit"]] == expected
            shown = git(repo, "show", f"{result['commit']}:{slug(result['item'])}.txt")
            assert shown == result["item"]
            assert (
                Path(result["artifacts"]["agent_log"])
                .read_text()
                .endswith(f"implemented {result['item']}\n")
            )
        assert len(landed) == len(indexes[worker]) + 1  # one commit per task on top of `initial`
    assert git(repo, "rev-parse", "main") == git(repo, "rev-list", "--max-parents=0", "main")

    # The coordinator hands front one more task: an explicit assignment outside the backlog.
    sent = cli(
        "message",
        f"branch:{run}/front",
        "task.assign",
        json.dumps({"item": "extra item"}),
        "--body-json",
    )
    assert sent.returncode == 0 and "route=branch" in sent.stdout, sent.stderr
    count = len(messages)
    messages = wait_room(
        home, run, lambda ms: len(results(ms)) == 7 and idle(ms[count:], run, "front")
    )
    extra = of(messages[count:], run, "front")
    assert [m["type"] for m in extra] == ["task.claim", "task.result", "task.awaiting"]
    outcome = extra[1]["body"]
    assert outcome["ok"] and outcome["source"] == "assignment" and outcome["index"] is None
    assert git(repo, "rev-parse", f"actors/{run}/front") == outcome["commit"]
    assert git(repo, "show", f"{outcome['commit']}:extra-item.txt") == "extra item"
    assert not of(messages[count:], run, "back")
    # Kept alive, the swarm said it drained once per drain: the backlog, then the extra.
    messages = wait_room(
        home, run, lambda ms: len([m for m in ms if m["type"] == "swarm.drained"]) == 2
    )
    drains = [m["body"] for m in messages if m["type"] == "swarm.drained"]
    assert [(d["drain"], d["done"], d["failed"]) for d in drains] == [(1, 6, 0), (2, 7, 0)]
    assert drains[1]["kept_alive"] is True
    assert {b["branch"]: b["head"] for b in drains[1]["branches"]} == {
        f"actors/{run}/front": outcome["commit"],
        f"actors/{run}/back": git(repo, "rev-parse", f"actors/{run}/back"),
    }
    assert actors.status(run)["status"] == "running"

    kill_and_reap(record, worker_pids)
    print(f"drained in {drained - started:.1f}s, total {time.monotonic() - started:.1f}s")


def test_a_failed_validation_is_reported_and_the_worker_stays_for_the_next_assignment(
    home: StateRoot, tmp_path: Path, repo: Path
) -> None:
    record = spawn_swarm(
        tmp_path,
        repo,
        "- [ ] broken item\n- [ ] other item\n",
        validate_cmd="sh -c 'echo lint: 2 problems >&2; exit 3'",
        self_select="false",
        keep_alive="true",
    )
    run = record["run"]
    base = git(repo, "rev-parse", "main")
    # Without self-selection nobody claims until told to.
    messages = wait_room(home, run, lambda ms: idle(ms, run, "front") and idle(ms, run, "back"))
    assert [m["type"] for m in messages] == ["task.awaiting", "task.awaiting"]

    sent = cli(
        "message", f"branch:{run}/front", "task.assign", '{"backlog": "next"}', "--body-json"
    )
    assert sent.returncode == 0, sent.stderr
    messages = wait_room(home, run, lambda ms: len(results(ms)) == 1 and idle(ms, run, "front"))
    front = of(messages, run, "front")
    assert [m["type"] for m in front] == [
        "task.awaiting",
        "task.claim",
        "task.result",
        "task.awaiting",
    ]
    failed = front[2]["body"]
    assert failed["item"] == "broken item" and failed["index"] == 1
    assert failed["ok"] is False and failed["commit"] is None
    assert failed["reason"].startswith("validation exited 3: lint: 2 problems")
    assert front[2]["summary"] == "front failed: broken item"
    # The attempt did not land on the branch; it is kept aside for inspection.
    branch = f"actors/{run}/front"
    assert git(repo, "rev-parse", branch) == base
    kept = failed["artifacts"]["failed_ref"]
    assert git(repo, "show", f"{kept}:broken-item.txt") == "broken item"
    assert "lint: 2 problems" in Path(failed["artifacts"]["validate_log"]).read_text()
    assert front[3]["body"]["idle"] is True
    assert actors.status(run)["status"] == "running"
    # The coordinator is told, once, which task failed and why (the room wakes nobody).
    owner = SessionInbox(session_paths(home, record["owner_id"])).entries()
    (told,) = [e["envelope"] for e in owner]
    assert told["type"] == "task.failed" and told["from"] == f"branch:{run}/front"
    assert told["summary"].startswith(
        f"Run {run}: front failed task 1 (broken item): validation exited 3: lint: 2 problems"
    )
    assert told["summary"].endswith(f"; next: actors inspect room:{run}")
    assert told["body"]["reason"] == failed["reason"]
    assert told["body"]["retry"] == (
        f'actors message branch:{run}/front task.assign \'{{"item": "broken item"}}\' --body-json'
    )

    # Still alive: the next assignment (with a validation override) runs and lands.
    sent = cli(
        "message",
        f"branch:{run}/front",
        "task.assign",
        json.dumps({"item": "other item", "validate_cmd": "true"}),
        "--body-json",
    )
    assert sent.returncode == 0, sent.stderr
    messages = wait_room(home, run, lambda ms: len(results(ms)) == 2 and idle(ms, run, "front"))
    fixed = results(messages)[-1]
    assert fixed["ok"] and fixed["index"] == 2  # the assignment took the backlog's item 2
    assert git(repo, "rev-parse", branch) == fixed["commit"]
    assert of(messages, run, "back")[-1]["body"]["idle"] is True
    assert len(of(messages, run, "back")) == 1

    pids = [of(messages, run, w)[-1]["body"]["pid"] for w in ("front", "back")]
    # Both items claimed, both workers idle: drained (kept alive, so the run goes on).
    owner = SessionInbox(session_paths(home, record["owner_id"])).entries()
    wait_for_change(
        session_paths(home, record["owner_id"]).dir,
        lambda: len(SessionInbox(session_paths(home, record["owner_id"])).entries()) == 2,
        timeout=60,
        what="the swarm.drained follow-up",
    )
    owner = SessionInbox(session_paths(home, record["owner_id"])).entries()
    # the success itself is silent: one follow-up for the failure, one for the drain
    assert [e["envelope"]["type"] for e in owner] == ["task.failed", "swarm.drained"]
    assert actors.status(run)["status"] == "running"
    kill_and_reap(record, pids)


def test_an_unreadable_backlog_is_refused_at_spawn_with_nothing_made(
    home: StateRoot, tmp_path: Path, repo: Path
) -> None:
    """The precheck reads the backlog before anything exists (it used to fail each
    worker in turn, after their worktrees and branches were made)."""
    (tmp_path / "backlog.md").write_bytes(b"- [ ] caf\xe9 item\n")  # not UTF-8
    proc = cli(
        "spawn",
        "backlog-implementers",
        "-v",
        f"backlog={tmp_path / 'backlog.md'}",
        "-v",
        f"repo={repo}",
        "-v",
        "agent_cmd=true",
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == (
        f"actors: backlog-implementers: backlog file {tmp_path / 'backlog.md'} is not UTF-8"
        " text (invalid continuation byte)"
    )
    assert not home.runs.exists() or not list(home.runs.iterdir())
    assert git(repo, "branch", "--format=%(refname:short)") == "main"

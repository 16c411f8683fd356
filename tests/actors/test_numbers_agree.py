"""One definition of a step, an attempt, a retry and a timeout's exit code
(runtime.views.counts), and every view agrees on them: `status`, `result`, `ls`,
/metrics (`actors metrics`) and, in tests/dashboard/test_browser.py, the dashboard.

The recipe is three leaves: one that fails its first attempt and succeeds on its retry
(with a `recover` command between), one that times out, one that just runs. So: 3
steps, 2 done, 1 failed of which 1 timed out, 4 attempts, 1 retry; the recover command
is neither a step nor an attempt, and the timed-out command exits 124 as its node does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, write_recipe
from tests.dashboard.test_metrics import parse, value

COUNTS = {
    "completed": 2,
    "failed": 1,
    "timed_out": 1,
    "cancelled": 0,
    "attempts": 4,
    "retries": 1,
}
STEPS = "0 active, 2 done, 1 failed (1 timed out); 4 attempts, 1 retry"


def three_leaves(tmp_path: Path) -> dict[str, Any]:
    """Spawned and finished: flaky (retried once, recovered), slow (times out), last."""
    marker = tmp_path / "tried-once"
    recipe = {
        "template": [
            {
                "label": "flaky",
                "template": f"sh -c 'test -e {marker} || {{ touch {marker}; exit 3; }}; echo ok'",
                "retry": 3,
                "recover": "true",
            },
            {"label": "slow", "template": "sleep 30", "timeout": "300ms"},
            {"label": "last", "template": "echo last"},
        ]
    }
    done = cli("spawn", "--json", str(write_recipe(tmp_path, "three", recipe)))
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    assert finished(record)["status"] == "failed"
    return record


def test_status_result_ls_and_metrics_count_the_same_steps(home: StateRoot, tmp_path: Path) -> None:
    run = three_leaves(tmp_path)["run"]

    status = json.loads(cli("status", "--json", run).stdout)
    assert {k: status.get(k) for k in COUNTS} == COUNTS
    assert status["active"] == 0
    assert f"steps    {STEPS}" in cli("status", run).stdout

    result = json.loads(cli("result", "--json", run).stdout)
    assert {k: result.get(k) for k in COUNTS} == COUNTS
    shown = cli("result", run).stdout
    assert f"steps    {STEPS}" in shown

    (listed,) = json.loads(cli("ls", "--json").stdout)
    assert {k: listed.get(k) for k in COUNTS} == COUNTS
    assert isinstance(listed["duration_ms"], int) and listed["duration_ms"] >= 300

    series = parse(cli("metrics").stdout)
    assert value(series, "actors_steps", state="completed") == 2
    assert value(series, "actors_steps", state="failed") == 1
    assert value(series, "actors_steps", state="timed_out") == 1
    assert value(series, "actors_step_attempts") == 4
    assert value(series, "actors_step_retries") == 1


def test_a_timeout_has_one_exit_code(home: StateRoot, tmp_path: Path) -> None:
    """The timed-out command, its node and the run all say 124 (the command once said
    143, the SIGTERM that stopped it, next to its node's 124)."""
    run = three_leaves(tmp_path)["run"]
    result = json.loads(cli("result", "--json", run).stdout)
    (slow,) = [f for f in result["failures"] if f.get("label") == "slow"]
    assert slow["status"] == "timeout"
    assert slow["code"] == slow["exit_code"] == 124
    shown = cli("result", run).stdout
    assert "slow (timeout, code 124, policy continue)" in shown
    assert "exit     124  (timed out after 300 ms)" in shown
    assert "143" not in shown
    events = [json.loads(line) for line in (home.run(run).events).read_text().splitlines()]
    (stopped,) = [e for e in events if e["event"] == "command.done" and e.get("label") == "slow"]
    assert (stopped["status"], stopped["code"]) == ("timeout", 124)
    recovers = [e for e in events if e["event"] == "command.start" and e.get("recover")]
    assert [e["command"] for e in recovers] == ["true"]


def test_a_folded_run_counts_by_the_same_definition(home: StateRoot, tmp_path: Path) -> None:
    """A run whose runner died has its counters folded from events.jsonl by the very
    class the runner counts with: the same numbers, whoever wrote result.json."""
    from runtime.store.reads import read_jsonl
    from runtime.views.counts import Steps

    run = three_leaves(tmp_path)["run"]
    paths = home.run(run)
    instance = json.loads(paths.run_json.read_text())["run_instance_id"]
    steps = Steps.from_events(read_jsonl(paths.events).records, instance)
    folded = steps.counts()
    assert {k: folded[k] for k in COUNTS} == COUNTS  # type: ignore[literal-required]
    # a parked runner keeps its fold across exec() as JSON: the same counters come back
    assert Steps.restore(json.loads(json.dumps(steps.snapshot()))).counts() == folded


def test_a_killed_run_keeps_its_steps(home: StateRoot, tmp_path: Path) -> None:
    """`kill` writes the result of a run whose runner it stopped: its counters are the
    journal's by the same definition (2 done, the running one cancelled), not zeros."""
    from tests.conftest import make_fifo, read_fifo_line

    ready = make_fifo(tmp_path / "ready.fifo")
    recipe = {"template": ["echo one", "echo two", f"sh -c 'echo up > {ready}; exec sleep 300'"]}
    done = cli("spawn", "--json", str(write_recipe(tmp_path, "stopped", recipe)))
    run = json.loads(done.stdout)["run"]
    assert read_fifo_line(ready) == "up"
    assert cli("kill", run).returncode == 0
    expected = {"completed": 2, "failed": 0, "cancelled": 1, "attempts": 3, "retries": 0}
    status = json.loads(cli("status", "--json", run).stdout)
    assert status["status"] == "killed"
    assert {k: status.get(k) for k in expected} == expected
    (listed,) = json.loads(cli("ls", "--json").stdout)
    assert {k: listed.get(k) for k in expected} == expected
    assert "steps    0 active, 2 done, 0 failed, 1 cancelled; 3 attempts, 0 retries" in (
        cli("status", run).stdout
    )

"""Template graph semantics, each asserted on result.json and status of a real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import actors
from runtime.store.layout import StateRoot
from tests.conftest import alive, write_recipe


def run_recipe(
    home: StateRoot, tmp_path: Path, recipe: dict[str, Any], **values: str
) -> dict[str, Any]:
    path = write_recipe(tmp_path, "case", recipe)
    record = actors.spawn(str(path), values=values)
    final = actors.wait(record["run"], timeout=60)
    assert final["status"] not in ("running", "starting"), final
    return actors.result(record["run"])


def test_sequence_feeds_each_step_the_previous_complete_stdout(
    home: StateRoot, tmp_path: Path
) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "template": [
                "head -c {size} /dev/zero",
                "wc -c",
                "sed s/^/count:/",
            ]
        },
        size="200000",
    )
    assert result["status"] == "done"
    assert result["code"] == 0
    assert result["output"].strip() == "count:200000"
    assert [n["id"] for n in result["nodes"]] == ["1.1", "1.2", "1.3", "1"]


def test_parallel_joins_outputs_in_order_under_headers(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "parallel": True,
            "template": [
                {"label": "slow", "template": "sh -c 'sleep 0.3; echo first'"},
                {"label": "fast", "template": "echo second"},
            ],
        },
    )
    assert result["status"] == "done"
    assert result["output"] == (
        "--- branch: slow status: done ---\nfirst\n--- branch: fast status: done ---\nsecond\n"
    )


def test_parallel_branches_share_the_same_stdin(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "template": [
                "echo shared-input",
                {
                    "parallel": True,
                    "template": [
                        {"label": "a", "template": "cat"},
                        {"label": "b", "template": "tr a-z A-Z"},
                    ],
                },
            ]
        },
    )
    assert "shared-input" in result["output"] and "SHARED-INPUT" in result["output"]


def _intervals(result: dict[str, Any]) -> list[tuple[int, int]]:
    spans = []
    for line in result["output"].splitlines():
        if line.startswith("span "):
            _, start, end = line.split()
            spans.append((int(start), int(end)))
    return spans


def _max_overlap(spans: list[tuple[int, int]]) -> int:
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = current = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def test_concurrency_bounds_how_many_branches_run_at_once(home: StateRoot, tmp_path: Path) -> None:
    # 1 s spans: two branches started in the same slot overlap even on a loaded machine
    leaf = "sh -c 'a=$(date +%s%N); sleep 1; echo span $a $(date +%s%N)'"
    result = run_recipe(
        home, tmp_path, {"parallel": True, "concurrency": 2, "template": [leaf] * 4}
    )
    spans = _intervals(result)
    assert len(spans) == 4
    assert _max_overlap(spans) == 2


def test_min_successful_accepts_a_quorum_and_marks_degraded(
    home: StateRoot, tmp_path: Path
) -> None:
    branches = ["echo a", "echo b", "sh -c 'exit 4'"]
    result = run_recipe(
        home, tmp_path, {"parallel": True, "min_successful": 2, "template": branches}
    )
    assert result["status"] == "done"
    assert result["degraded"] is True
    assert result["output"].startswith(
        "--- parallel_status: degraded usable: 2 expected: 3 minimum: 2 ---\n"
    )
    short = run_recipe(
        home, tmp_path, {"parallel": True, "min_successful": 3, "template": branches}
    )
    assert short["status"] == "failed"
    assert "insufficient_data" in short["output"]
    assert short["reason"] == "2 of 3 branches usable (minimum 3)"


def test_min_successful_from_a_value_applies_to_parallel_repeat_instances(
    home: StateRoot, tmp_path: Path
) -> None:
    """A quorum given at spawn (`{quorum}`) on a parallel `repeat` leaf: the instances are
    joined as a group that needs that many usable branches (the shape of review-quorum)."""
    recipe = {
        "args": {"quorum": {"type": "int"}},
        "template": [
            {
                "label": "r",
                "repeat": "{xs.length}",
                "parallel": True,
                "min_successful": "{quorum}",
                "template": 'sh -c \'test "$1" != bad && echo "$1"\' r {xs[index]}',
            }
        ],
    }
    ok = run_recipe(home, tmp_path, recipe, xs="a,bad,c", quorum="2")
    assert (ok["status"], ok["degraded"]) == ("done", True), ok
    assert ok["output"].startswith("--- parallel_status: degraded usable: 2 expected: 3 minimum: 2")
    short = run_recipe(home, tmp_path, recipe, xs="a,bad,c", quorum="3")
    assert short["status"] == "failed"
    assert short["reason"] == "2 of 3 branches usable (minimum 3)"
    too_many = run_recipe(home, tmp_path, recipe, xs="a,c", quorum="3")
    assert too_many["status"] == "failed"
    assert "min_successful: 3 is outside 0-2 branches" in json.dumps(too_many), too_many


def test_parallel_repeat_leaf_keeps_its_concurrency(home: StateRoot, tmp_path: Path) -> None:
    """`concurrency` on a parallel `repeat` leaf caps the instances (it was dropped once)."""
    recipe = {
        "template": [
            {
                "repeat": 4,
                "parallel": True,
                "concurrency": 1,
                "template": "sh -c 'a=$(date +%s%N); sleep 0.2; echo span $a $(date +%s%N)'",
            }
        ]
    }
    spans = _intervals(run_recipe(home, tmp_path, recipe))
    assert len(spans) == 4
    assert _max_overlap(spans) == 1


def test_timeout_stops_the_leaf_and_its_grandchildren(home: StateRoot, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    result = run_recipe(
        home,
        tmp_path,
        {
            "timeout": "2s",  # the leaf writes the pid file itself: time for a slow start
            "template": "sh -c 'sleep 300 & echo $! > \"$1\"; sleep 300' leaf {pidfile}",
        },
        pidfile=str(pidfile),
    )
    assert result["status"] == "failed"
    assert result["code"] == 124
    assert result["reason"] == "timed out after 2000 ms"
    grandchild = int(pidfile.read_text())
    assert not alive(grandchild)


def test_retry_runs_recover_between_attempts(home: StateRoot, tmp_path: Path) -> None:
    counter, log = tmp_path / "counter", tmp_path / "recover.log"
    flaky = (
        'sh -c \'n=$(cat "$1" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$1"; '
        "[ $n -ge 3 ]' flaky {counter}"
    )
    recover = "sh -c 'echo recovered >> \"$1\"' recover {log}"
    result = run_recipe(
        home,
        tmp_path,
        {"retry": 3, "recover": recover, "template": flaky},
        counter=str(counter),
        log=str(log),
    )
    assert result["status"] == "done"
    assert counter.read_text().strip() == "3"
    assert log.read_text().splitlines() == ["recovered", "recovered"]
    assert result["nodes"][-1]["attempts"] == 3


def test_retry_gives_up_after_the_maximum_attempts(home: StateRoot, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    always_fails = "sh -c 'echo x >> \"$1\"; exit 5' fail {counter}"
    result = run_recipe(
        home, tmp_path, {"retry": 2, "template": always_fails}, counter=str(counter)
    )
    assert result["status"] == "failed"
    assert result["code"] == 5
    assert len(counter.read_text().splitlines()) == 2


def test_failed_recover_stops_retrying(home: StateRoot, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    result = run_recipe(
        home,
        tmp_path,
        {
            "retry": 5,
            "recover": "false",
            "template": "sh -c 'echo x >> \"$1\"; exit 1' f {counter}",
        },
        counter=str(counter),
    )
    assert result["status"] == "failed"
    assert len(counter.read_text().splitlines()) == 1
    assert "recover failed" in result["failures"][-1]["reason"]


def test_failure_continue_runs_the_rest_but_fails_the_run(home: StateRoot, tmp_path: Path) -> None:
    marker = tmp_path / "after"
    result = run_recipe(
        home,
        tmp_path,
        {
            "template": [
                "sh -c 'exit 7'",
                "sh -c 'touch \"$1\"' after {marker}",
            ]
        },
        marker=str(marker),
    )
    assert marker.exists()
    assert result["status"] == "failed"
    assert result["code"] == 7
    assert result["failures"][0]["policy"] == "continue"
    assert actors.status(result["run"])["status"] == "failed"


def test_failure_branch_stops_its_subtree_and_degrades_the_run(
    home: StateRoot, tmp_path: Path
) -> None:
    never = tmp_path / "never"
    result = run_recipe(
        home,
        tmp_path,
        {
            "parallel": True,
            "template": [
                {
                    "label": "broken",
                    "template": [
                        {"failure": "branch", "template": "sh -c 'exit 3'"},
                        "sh -c 'touch \"$1\"' never {never}",
                    ],
                },
                {"label": "healthy", "template": "echo fine"},
            ],
        },
        never=str(never),
    )
    assert result["status"] == "done"
    assert result["degraded"] is True
    assert not never.exists()
    assert "--- branch: broken status: failed ---" in result["output"]
    assert "--- branch: healthy status: done ---\nfine" in result["output"]
    summary = actors.status(result["run"])
    assert summary["status"] == "done" and summary["degraded"] is True


def test_failure_root_aborts_everything_at_once(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "parallel": True,
            "template": [
                {"label": "slow", "template": "sleep 30"},
                {"label": "fatal", "failure": "root", "template": "sh -c 'sleep 0.2; exit 9'"},
            ],
        },
    )
    assert result["status"] == "failed"
    assert result["code"] == 9
    assert "failure=root" in result["reason"]
    assert result["duration_ms"] < 20_000


def test_missing_command_fails_with_127(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(home, tmp_path, {"template": "no-such-command-xyz"})
    assert result["status"] == "failed"
    assert result["code"] == 127
    stderr = (home.run(result["run"]).stderr).read_text()
    assert "cannot start 'no-such-command-xyz'" in stderr


def test_artifacts_manifest_records_exists_size_and_sha256(home: StateRoot, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    result = run_recipe(
        home,
        tmp_path,
        {
            "artifacts": {"report": "{out}", "absent": {"path": "nothing-here.txt"}},
            "template": "sh -c 'printf abc > \"$1\"' w {out}",
        },
        out=str(out),
    )
    report = result["artifacts"]["report"]
    assert report["exists"] is True and report["size"] == 3
    assert report["sha256"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert result["artifacts"]["absent"]["exists"] is False
    assert result["status"] == "done"


def test_required_artifact_missing_fails_the_run(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {"artifacts": {"report": {"path": "missing.txt", "required": True}}, "template": "true"},
    )
    assert result["status"] == "failed"
    assert result["reason"] == "required artifact missing: report"


def test_every_state_record_carries_the_run_instance_id(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(home, tmp_path, {"template": ["echo a", "echo b"]})
    paths = home.run(result["run"])
    instance = json.loads(paths.run_json.read_text())["run_instance_id"]
    events = [json.loads(line) for line in paths.events.read_text().splitlines()]
    assert events and all(e["run_instance_id"] == instance for e in events)
    assert json.loads(paths.progress.read_text())["run_instance_id"] == instance
    assert result["run_instance_id"] == instance
    names = [e["event"] for e in events]
    assert names[0] == "run.start" and names[1] == "run.runner.start" and names[-1] == "run.done"

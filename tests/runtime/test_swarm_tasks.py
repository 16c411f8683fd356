"""The per-task table of a swarm's room (runtime/views/swarm_tasks.py), folded from
messages any process of the run may have posted: whatever their bodies hold, the fold
answers with a table (never an exception), each claim settled only by its own worker's
result, and a run that ended turns what nobody answered into `interrupted`."""

from __future__ import annotations

from typing import Any

from runtime.views.swarm_tasks import ITEM_CHARS, is_swarm, swarm_tasks


def claim(task: Any, worker: str, item: Any = "an item", **extra: Any) -> dict[str, Any]:
    body = {"task": task, "worker": worker, "item": item, "index": 1, **extra}
    return {"type": "task.claim", "from": f"branch:r/{worker}", "body": body, "ts": "t1"}


def result(task: Any, worker: str, ok: Any, **extra: Any) -> dict[str, Any]:
    body = {"task": task, "worker": worker, "ok": ok, **extra}
    return {"type": "task.result", "from": f"branch:r/{worker}", "body": body, "ts": "t2"}


def test_claims_are_settled_by_their_own_workers_result_in_task_order() -> None:
    table = swarm_tasks(
        [
            claim(2, "back", "second"),
            claim(1, "front", "first"),
            result(2, "front", True, commit="c0"),  # front never claimed task 2: ignored
            result(2, "back", False, reason="validation exited 3"),
            result(1, "front", True, commit="c1"),
            result(1, "front", False, reason="a second answer changes nothing"),
        ]
    )
    rows = [(r["task"], r["worker"], r["state"], r["commit"], r["reason"]) for r in table["tasks"]]
    assert rows == [
        (1, "front", "done", "c1", None),
        (2, "back", "failed", None, "validation exited 3"),
    ]
    assert table["counts"] == {"done": 1, "failed": 1}
    assert table["drained"] is None


def test_what_nobody_answered_is_working_until_the_run_ends() -> None:
    messages = [claim(1, "front"), claim(2, "back"), result(2, "back", True)]
    assert [r["state"] for r in swarm_tasks(messages)["tasks"]] == ["working", "done"]
    ended = swarm_tasks(messages, ended=True)
    assert [r["state"] for r in ended["tasks"]] == ["interrupted", "done"]
    assert ended["counts"] == {"interrupted": 1, "done": 1}


def test_malformed_bodies_fold_to_a_table_without_an_exception() -> None:
    huge = "x" * (ITEM_CHARS * 10)
    table = swarm_tasks(
        [
            {"type": "task.claim", "from": "branch:r/a", "body": "not an object"},
            {"type": "task.claim", "from": "branch:r/b", "body": None},
            {"type": "task.claim", "body": {"task": True, "index": "7", "item": ["a"]}},
            claim({"nested": 1}, "c", huge),
            {"type": "task.result", "body": [1, 2]},
            {"type": "swarm.drained", "body": {"done": "many", "failed": None}, "summary": 3},
            {"type": None},
            {},
        ]
    )
    assert len(table["tasks"]) == 4
    for row in table["tasks"]:
        assert row["task"] is None and row["state"] == "working"  # nothing could settle them
        assert row["index"] in (None, 1)
        assert row["item"] is None or len(row["item"]) <= ITEM_CHARS
    assert [r["worker"] for r in table["tasks"]] == ["a", "b", "", "c"]
    assert table["drained"] == {"at": None, "summary": "3", "done": None, "failed": None}


def test_a_swarm_is_a_run_that_declares_the_protocol() -> None:
    assert is_swarm({"mailbox": {"emits": ["task.claim", "task.result"]}})
    assert is_swarm({"mailbox": {"emits": [{"type": "task.claim"}]}})
    assert not is_swarm({"mailbox": {"emits": ["player.track"]}})
    assert not is_swarm({"mailbox": None})
    assert not is_swarm({})


def test_the_swarms_own_group_is_a_valid_id_for_any_run_id() -> None:
    """`swarm-<run>` for a run id of 64 characters would be 70: cut, with a digest so
    two long ids sharing a beginning never share a group."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "recipes" / "scripts"))
    from backlog_finish import own_group

    from runtime.store.layout import check_id

    assert own_group("s1") == "swarm-s1"
    first, second = own_group("a" * 63 + "1"), own_group("a" * 63 + "2")
    assert len(first) == len(second) == 64 and first != second
    for name in (first, second):
        assert check_id(name, "group") == name

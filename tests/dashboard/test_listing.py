"""The runs page's read model: a page of a listing, filtered, nested, grouped.

Rows are built as `list_runs` returns them (plain records); the board that keeps them
fresh is exercised against real runs at the end."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot
from runtime.views.board import RunBoard
from runtime.views.listing import RunFilter, page_of
from tests.conftest import cli, finished


def run(
    name: str, status: str, *, at: int, owner: str = "me", parent: str | None = None, **kw: Any
) -> dict[str, Any]:
    return {
        "run": name,
        "status": status,
        "created_at": f"2026-01-01T00:{at // 60:02d}:{at % 60:02d}.000Z",
        "owner_id": owner,
        "parent": parent,
        "recipe": kw.pop("recipe", None),
        "command": kw.pop("command", None),
        **kw,
    }


def newest_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["created_at"], reverse=True)


def test_pages_are_cut_from_top_level_runs_with_children_nested() -> None:
    rows = newest_first(
        [run(f"r{i:03d}", "done", at=i) for i in range(120)]
        + [run("kid", "running", at=200, parent="run:r005", active=3, branches={"a": "running"})]
    )
    first = page_of(rows, RunFilter(per=50))
    assert (first["total"], first["matched"], first["pages"]) == (120, 121, 3)
    names = [n["run"] for g in first["groups"] for n in g["runs"]]
    assert names == [f"r{i:03d}" for i in range(119, 69, -1)]
    last = page_of(rows, RunFilter(page=3, per=50))
    parent = next(n for g in last["groups"] for n in g["runs"] if n["run"] == "r005")
    assert [k["run"] for k in parent["children"]] == ["kid"]  # on its parent's page
    assert parent["children"][0]["units"] == 3 and parent["children"][0]["branches"] == {
        "a": "running"
    }
    assert last["groups"][0]["units"] == 3  # the ▷ of the whole tree
    assert page_of(rows, RunFilter(page=4, per=50))["groups"] == []


def test_filters_by_status_session_and_text() -> None:
    rows = newest_first(
        [
            run("a", "running", at=1, owner="s1", recipe="player"),
            run("b", "failed", at=2, owner="s2", command="make test"),
            run("c", "done", at=3, owner="s1", recipe="hello"),
            run("d", "starting", at=4, owner="s2", recipe="PLAYER-two"),
        ]
    )

    def names(**kw: Any) -> list[str]:
        page = page_of(rows, RunFilter(**kw))
        return sorted(n["run"] for g in page["groups"] for n in g["runs"])

    assert names(status="active") == ["a", "d"]
    assert names(status="failed,done") == ["b", "c"]
    assert names(session="s1") == ["a", "c"]
    assert names(text="player") == ["a", "d"]  # recipe, any case
    assert names(text="make") == ["b"]  # an inline template's command
    assert names(status="terminal", session="s2") == ["b"]
    page = page_of(rows, RunFilter())
    assert [g["session"] for g in page["groups"]] == ["s2", "s1"]
    assert page["counts"] == {"running": 1, "failed": 1, "done": 1, "starting": 1}


@pytest.mark.parametrize(
    "flt", [RunFilter(status="bogus"), RunFilter(page=0), RunFilter(per=0), RunFilter(per=501)]
)
def test_a_bad_filter_is_one_readable_error(flt: RunFilter) -> None:
    with pytest.raises(BadInput):
        page_of([], flt)


def test_the_board_refreshes_only_the_runs_named(home: StateRoot) -> None:
    board = RunBoard(home)
    board.load()
    assert board.runs() == []
    done = cli("spawn", "--json", "-t", "true")
    import json

    record = json.loads(done.stdout)
    finished(record)
    assert board.runs() == []  # nothing re-read until told
    assert board.refresh({record["run"], "not-a-run", "../x"}) == {record["run"]}
    assert [r["status"] for r in board.runs()] == ["done"]
    assert board.refresh({record["run"]}) == set()  # unchanged: no new version
    version = board.version
    cli("prune", record["run"])
    assert board.refresh({record["run"]}) == {record["run"]}
    assert board.runs() == [] and board.version == version + 1

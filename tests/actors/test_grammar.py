"""Issue 18, points 3, 9 and 10: typos refused with one converter, output sized for agents,
one CLI grammar. Everything through the real CLI (or the real MCP server) on a private
state root."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, snapshot, write_recipe


def _runs(home: StateRoot) -> list[str]:
    runs = home.path / "runs"
    return sorted(os.listdir(runs)) if runs.exists() else []


# --- point 3: typos refused, one converter ------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["spawn", "hello", "-v", "nmae=you"],
            "recipe hello has no parameter nmae; did you mean name?",
        ),
        (["spawn", "-t", "echo {who}", "-v", "woh=x"], "the template has no parameter woh"),
        (["spawn", "-t", "echo hi", "-v", "x=1"], "the template takes no parameters"),
        (["spawn", "-t", "echo {x}", "-v", "x=1", "-v", "x=2"], "-v x is given twice"),
        (["run", "hello", "--nmae", "you"], "did you mean --name?"),
    ],
)
def test_a_misspelt_value_name_is_refused_and_nothing_is_spawned(
    home: StateRoot, argv: list[str], said: str
) -> None:
    before = snapshot(home.path)
    proc = cli(*argv)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _runs(home) == [] and snapshot(home.path) == before


def test_the_python_api_refuses_a_misspelt_value_too(home: StateRoot) -> None:
    from runtime.core.errors import BadInput

    with pytest.raises(BadInput, match="did you mean name"):
        actors.spawn("hello", values={"nmae": "you"})
    assert _runs(home) == []


async def test_mcp_values_are_checked_like_the_cli(home: StateRoot) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "actors", "mcp"], env=dict(os.environ)
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        bad = await session.call_tool("spawn", {"recipe": "hello", "values": {"nmae": "you"}})
        assert bad.is_error and "did you mean name?" in bad.content[0].text
    assert _runs(home) == []


def _echo_items(tmp_path: Path, declared: bool) -> Path:
    """A project recipe printing its array value as JSON: declared `array`, or inferred
    from `{items.length}`."""
    show = f"{sys.executable} -c 'import sys; print(sys.argv[1])' {{items}} {{items.length}}"
    recipe: dict[str, Any] = {"template": show}
    if declared:
        recipe["args"] = {"items": {"type": "array"}}
    project = tmp_path / ".actors" / "recipes"  # the tests run in tmp_path
    project.mkdir(parents=True)
    return write_recipe(project, "items-declared" if declared else "items-inferred", recipe)


@pytest.mark.parametrize("declared", [True, False])
def test_run_spawn_and_the_api_split_a_list_the_same_way(
    home: StateRoot, tmp_path: Path, declared: bool
) -> None:
    """`--items api,ui`, `-v items=api,ui`, `-v items='["api","ui"]'` and the API's JSON
    list all make the same two items: one converter."""
    recipe = _echo_items(tmp_path, declared)
    name = recipe.stem
    outputs = [
        cli("run", name, "--items", "api,ui").stdout,
        cli("run", name, "--items", "api", "--items", "ui").stdout,
    ]
    for value in ("api,ui", '["api","ui"]'):
        run_id = cli("spawn", name, "-v", f"items={value}").stdout.strip()
        actors.wait(run_id, timeout=60)
        outputs.append(actors.result(run_id)["output"])
    run_id = actors.spawn(name, values={"items": ["api", "ui"]})["run"]
    actors.wait(run_id, timeout=60)
    outputs.append(actors.result(run_id)["output"])
    assert outputs == ['["api","ui"]\n'] * 5

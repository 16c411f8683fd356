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


# --- point 9: output sized for agents -----------------------------------------------------


def test_inspect_n_limits_session_targets_and_every_list(home: StateRoot) -> None:
    ids = []
    for _ in range(3):
        ids.append(actors.spawn(template="true")["run"])
        actors.wait(ids[-1], timeout=60)
    newest = [r["run"] for r in actors.runs()][:2]
    for target in ("session:all", f"session:{actors.status(ids[0])['owner_id']}"):
        proc = cli("inspect", target, "--view", "runs", "-n", "2", "--json")
        data = json.loads(proc.stdout)
        assert [r["run"] for r in data["runs"]] == newest
        assert data["total"] == 3 and data["runs_omitted"] == 1
        text = cli("inspect", target, "--view", "runs", "-n", "2").stdout.splitlines()
        assert text[0].endswith("total=3 runs_omitted=1")
        assert [line.split()[1] for line in text[1:] if line.startswith("  run:")] == [
            f"run={r}" for r in newest
        ]
        assert actors.inspect(target, "runs", lines=2) == data  # the API: the same limit
        assert actors.api.inspect_text(target, "runs", lines=2).splitlines() == text
    files = json.loads(cli("inspect", ids[0], "--view", "files", "-n", "1", "--json").stdout)
    assert len(files["files"]) == 1 and files["files_omitted"] >= 1
    for bad in ("-1", "2001", "x"):
        refused = cli("inspect", "session:all", "-n", bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_cli_api_and_mcp_inspect_share_default_and_bounds() -> None:
    import inspect as pyinspect

    import click

    from actors.cli.messages import inspect_cmd
    from actors.tool_models import InspectParams
    from runtime.routing.inspect import LINES, MAX_LINES

    option = next(p for p in inspect_cmd.params if p.name == "lines")
    assert isinstance(option.type, click.IntRange)
    assert (option.default, option.type.min, option.type.max) == (LINES, 0, MAX_LINES)
    for function in (actors.api.inspect, actors.api.inspect_text):
        assert pyinspect.signature(function).parameters["lines"].default == LINES
    field = InspectParams.model_fields["lines"]
    assert field.default == LINES
    bounds = {type(m).__name__: m for m in field.metadata}
    assert (bounds["Ge"].ge, bounds["Le"].le) == (0, MAX_LINES)

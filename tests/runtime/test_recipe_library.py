"""Recipe discovery (priority, shadowing, blocking) and tool parameters, in process."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from recipes import SHIPPED_DIR
from runtime.compiler.library import (
    check_recipe_file,
    compile_source,
    find_recipe,
    list_recipes,
    recipe_roots,
)
from runtime.compiler.params import Param, bind_values, coerce, declared_args, parameters
from runtime.compiler.tools import register_tool
from runtime.core.errors import BadInput, Conflict
from runtime.store.layout import StateRoot
from runtime.store.tail import bounded_tail
from tests.conftest import snapshot, write_recipe


@pytest.fixture
def roots(home: StateRoot, tmp_path: Path) -> dict[str, Path]:
    """The private project and user roots of this test (the `home` fixture sets the cwd
    and XDG_CONFIG_HOME), created empty."""
    found = dict(recipe_roots())
    assert found["project"] == tmp_path / ".actors" / "recipes"
    assert found["user"] == tmp_path / "config" / "actors" / "recipes"
    assert found["shipped"] == SHIPPED_DIR
    for kind in ("project", "user"):
        found[kind].mkdir(parents=True)
    return found


def by_path(entries: list[Any]) -> dict[Path, Any]:
    return {entry.path: entry for entry in entries}


# --- discovery --------------------------------------------------------------------------


def test_roots_are_searched_project_then_user_then_shipped(roots: dict[str, Path]) -> None:
    project = write_recipe(roots["project"], "hello", {"template": "echo project"})
    user = write_recipe(roots["user"], "hello", {"template": "echo user"})
    only_user = write_recipe(roots["user"], "mine", {"template": "echo mine"})
    shipped = SHIPPED_DIR / "hello.json"

    assert find_recipe("hello").file == project.resolve()
    assert find_recipe("mine").file == only_user.resolve()
    entries = by_path(list_recipes())
    assert entries[project].root == "project"
    assert entries[project].shadows == (user, shipped)
    assert entries[project].shadowed_by is None and entries[project].active
    assert entries[user].shadowed_by == project and not entries[user].active
    assert entries[shipped].shadowed_by == project
    order = [e.root for e in list_recipes()]
    assert order == sorted(order, key=["project", "user", "shipped"].index)

    project.unlink()
    assert find_recipe("hello").file == user.resolve()
    user.unlink()
    assert find_recipe("hello").file == shipped


def test_an_invalid_json_recipe_blocks_the_lower_one_and_names_both(
    roots: dict[str, Path],
) -> None:
    broken = roots["project"] / "hello.json"
    broken.write_text('{"template": "echo hi",')
    with pytest.raises(BadInput) as caught:
        find_recipe("hello")
    message = str(caught.value)
    assert str(broken) in message and str(SHIPPED_DIR / "hello.json") in message
    assert "is not valid JSON: line 1" in message

    entry = by_path(list_recipes())[broken]
    assert entry.status == "invalid" and entry.problem.startswith("not valid JSON: line 1")
    assert entry.shadows == (SHIPPED_DIR / "hello.json",)


def test_a_schema_invalid_recipe_blocks_the_lower_one_and_names_both(
    roots: dict[str, Path],
) -> None:
    bad = write_recipe(roots["user"], "hello", {"template": "echo hi", "tiemout": 5})
    source = find_recipe("hello")  # readable JSON: the schema is checked when compiled
    assert source.file == bad.resolve()
    with pytest.raises(BadInput) as caught:
        compile_source(source, None)
    message = str(caught.value)
    assert str(bad) in message and str(SHIPPED_DIR / "hello.json") in message
    assert "tiemout: unknown key" in message

    entry = by_path(list_recipes())[bad]
    assert entry.status == "invalid"
    assert entry.problem == "tiemout: unknown key (see docs/recipes.md for the allowed keys)"


def test_a_disabled_recipe_blocks_the_lower_one(roots: dict[str, Path]) -> None:
    off = write_recipe(roots["project"], "fanout", {"template": "echo x", "disabled": True})
    with pytest.raises(BadInput) as caught:
        find_recipe("fanout")
    assert "is disabled, and it blocks" in str(caught.value)
    assert str(off) in str(caught.value) and str(SHIPPED_DIR / "fanout.json") in str(caught.value)
    assert find_recipe(str(off)).file == off.resolve()  # a path still runs it
    assert by_path(list_recipes())[off].status == "disabled"

    alone = write_recipe(roots["user"], "solo", {"template": "echo x", "disabled": True})
    with pytest.raises(BadInput, match=r"recipe solo at .* is disabled; remove"):
        find_recipe("solo")
    assert by_path(list_recipes())[alone].shadows == ()


def test_files_that_cannot_be_recipes_are_listed_as_invalid(roots: dict[str, Path]) -> None:
    (roots["project"] / "two words.json").write_text('{"template": "true"}')
    (roots["project"] / "list.json").write_text("[1]")
    (roots["project"] / ".hidden.json").write_text("{")
    (roots["project"] / "notes.txt").write_text("not a recipe")
    entries = {e.path.name: e for e in list_recipes() if e.root == "project"}
    assert set(entries) == {"two words.json", "list.json"}
    assert entries["two words.json"].problem == "the file name is not a valid recipe name"
    assert entries["list.json"].problem == "a recipe is a JSON object, not list"


def test_every_shipped_recipe_is_valid(home: StateRoot) -> None:
    shipped = sorted(SHIPPED_DIR.glob("*.json"))
    assert {p.stem for p in shipped} >= {"hello", "fanout", "ticker", "player"}
    for path in shipped:
        raw, problem = check_recipe_file(path)
        assert problem is None, f"{path}: {problem}"
        assert raw is not None
        parameters(raw)


def test_listing_without_validation_does_not_compile(roots: dict[str, Path]) -> None:
    write_recipe(roots["project"], "odd", {"template": 5})
    quick = {e.name: e for e in list_recipes(validate=False) if e.root == "project"}
    assert quick["odd"].status == "ok"
    full = {e.name: e for e in list_recipes() if e.root == "project"}
    assert full["odd"].status == "invalid"


# --- parameters -------------------------------------------------------------------------


def params_of(raw: dict[str, Any]) -> dict[str, Param]:
    return {p.name: p for p in parameters(raw)}


def test_parameters_come_from_placeholders_and_args() -> None:
    raw = {
        "args": {
            "count": {"type": "int", "default": 3, "description": "how many"},
            "mode": {"type": "enum", "values": ["fast", "slow"]},
        },
        "values": {"fixed": "v"},
        "defaults": {"soft": "d"},
        "template": [
            "echo {who} {greeting=hello} {run_id} {state_dir} {count} {fixed} {soft}",
            {"template": "echo {mode}", "when": "{enabled}"},
            {"template": "echo {items[index]} {index}", "repeat": "{items.length}"},
            "echo {maybe??none} {flag?yes:no} {index}",
        ],
        "recover": "echo {cleanup=on}",
        "artifacts": {"out": "{outdir=.}/result.txt"},
    }
    params = params_of(raw)
    assert list(params)[:2] == ["count", "mode"]  # declared first, in their order
    assert set(params) == {
        "count",
        "mode",
        "who",
        "greeting",
        "fixed",
        "soft",
        "enabled",
        "items",
        "maybe",
        "flag",
        "index",  # outside the repeat node `{index}` is an ordinary value
        "cleanup",
        "outdir",
    }
    assert params["who"].required and params["who"].type == "string"
    assert params["greeting"].default == "hello" and params["greeting"].default_from == "inline"
    assert params["count"].type == "int" and params["count"].default == 3
    assert params["count"].description == "how many"
    assert params["mode"].required and params["mode"].choices == ("fast", "slow")
    assert params["fixed"].default_from == "values" and not params["fixed"].required
    assert params["soft"].default_from == "defaults"
    assert not params["enabled"].required  # a `when` condition on a missing value is false
    assert params["items"].type == "array" and params["items"].required
    assert not params["maybe"].required and not params["flag"].required
    assert params["cleanup"].default == "on" and params["outdir"].default == "."


def test_default_precedence_is_values_defaults_args_inline() -> None:
    raw: dict[str, Any] = {
        "args": {"x": {"type": "string", "default": "from-args"}},
        "template": "echo {x=inline}",
    }
    assert params_of(raw)["x"].default == "from-args"
    raw["defaults"] = {"x": "from-defaults"}
    assert params_of(raw)["x"].default == "from-defaults"
    raw["values"] = {"x": "from-values"}
    assert params_of(raw)["x"].default == "from-values"


def test_args_in_the_pi_actors_list_forms() -> None:
    for spec in (["n:int", "mode:enum(a,b)", "f:path", "s"], "n:int, mode:enum(a,b), f:path, s"):
        args = declared_args({"args": spec, "template": "true"})
        assert args["n"]["type"] == "int"
        assert args["mode"] == {
            "type": "enum",
            "values": ["a", "b"],
            "default": None,
            "description": None,
        }
        assert args["f"]["type"] == "path" and args["s"]["type"] == "string"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"n": {"type": "integer"}}, "args.n.type: 'integer' is not one of"),
        ({"m": {"type": "enum"}}, "args.m.values: an enum needs"),
        ({"m": {"type": "string", "values": ["a"]}}, "args.m.values: only an enum"),
        ({"n": {"type": "int", "default": "many"}}, "args.n.default: expected an integer"),
        ({"m": {"type": "enum", "values": ["a"], "default": "b"}}, "args.m.default: expected one"),
        ({"run_id": {"type": "string"}}, "args.run_id: run_id is set by the runtime"),
        ({"n": {"type": "int", "min": 1}}, "args.n.min: unknown key"),
        ({"n": "int"}, "args.n: must be an object"),
        ({"bad-name": {}}, "'bad-name' is not a valid name"),
        (5, "args: must be an object"),
    ],
)
def test_malformed_args_are_reported_where(args: Any, message: str) -> None:
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        parameters({"args": args, "template": "true"})


# --- typed values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("int", "42", 42),
        ("int", "-3", -3),
        ("int", 7, 7),
        ("number", "2.5", 2.5),
        ("number", "4", 4),
        ("number", 1e3, 1e3),
        ("bool", "yes", True),
        ("bool", "OFF", False),
        ("bool", True, True),
        ("array", '["a", 1]', ["a", 1]),
        ("array", "one", ["one"]),
        ("array", [1, 2], [1, 2]),
        ("enum", "slow", "slow"),
        ("path", "~/x", str(Path.home() / "x")),
        ("path", "rel/p", "rel/p"),
        ("string", "any text; $(x)", "any text; $(x)"),
        ("string", 5, 5),
    ],
)
def test_values_are_converted_to_their_type(kind: str, given: Any, expected: Any) -> None:
    assert coerce(Param("p", kind, choices=("fast", "slow")), given) == expected


@pytest.mark.parametrize(
    ("kind", "given"),
    [
        ("int", "1.5"),
        ("int", "ten"),
        ("int", True),
        ("int", 2.0),
        ("number", "nan"),
        ("number", "inf"),
        ("number", "1,5"),
        ("number", False),
        ("bool", "maybe"),
        ("bool", 2),
        ("array", "[1,"),
        ("array", "[1] x"),
        ("array", 5),
        ("enum", "medium"),
        ("enum", 1),
        ("path", ""),
        ("path", "a\0b"),
        ("path", 5),
        ("string", ["a"]),
    ],
)
def test_badly_typed_values_are_refused(kind: str, given: Any) -> None:
    with pytest.raises(ValueError, match=r"expected|JSON|NUL"):
        coerce(Param("p", kind, choices=("fast", "slow")), given)


def test_bind_values_checks_names_counts_and_required_parameters() -> None:
    params = parameters(
        {
            "args": {
                "count": {"type": "int", "default": 2},
                "tags": {"type": "array"},
                "env": {"type": "enum", "values": ["dev", "prod"]},
            },
            "template": "echo {env} {count} {tags=[]} {note=}",
        }
    )
    bound = bind_values("t", params, {"env": ["prod"], "tags": ["a", "b"]})
    assert bound == {"env": "prod", "tags": ["a", "b"], "count": 2}  # args default filled in
    with pytest.raises(BadInput, match=r"has no parameter --evn; did you mean --env\?"):
        bind_values("t", params, {"evn": ["prod"]})
    with pytest.raises(BadInput, match=r"--env is given 2 times"):
        bind_values("t", params, {"env": ["dev", "prod"]})
    with pytest.raises(BadInput, match=r"tool t needs --env \(enum dev\|prod\)"):
        bind_values("t", params, {})
    with pytest.raises(BadInput, match=r"--count \(int\): expected an integer, got 'x'"):
        bind_values("t", params, {"env": ["dev"], "count": ["x"]})
    with pytest.raises(BadInput, match="run_id is set by the runtime"):
        bind_values("t", params, {"env": ["dev"], "run_id": ["x"]})
    assert bind_values("t", params, {"env": ["dev"], "note": ["n"]})["note"] == "n"


# --- registering ------------------------------------------------------------------------


def test_register_writes_atomically_and_never_overwrites_without_update(
    roots: dict[str, Path],
) -> None:
    user = roots["user"]
    user.rmdir()
    path, replaced = register_tool("greet", data=b'{"template": "echo hi {who}"}', label="t")
    assert path == user / "greet.json" and not replaced
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(user.stat().st_mode) == 0o700
    assert [p.name for p in user.iterdir()] == ["greet.json"]  # no staging file left

    with pytest.raises(Conflict, match=r"already exists.*pass --force"):
        register_tool("greet", data=b'{"template": "echo other"}', label="t")
    assert json.loads(path.read_text()) == {"template": "echo hi {who}"}

    before = snapshot(user)
    with pytest.raises(BadInput, match=r"t: tiemout: unknown key.*nothing was written"):
        register_tool("greet", data=b'{"template": "x", "tiemout": 1}', label="t", update=True)
    with pytest.raises(BadInput, match="invalid tool name"):
        register_tool("../evil", data=b'{"template": "x"}', label="t")
    assert snapshot(user) == before

    path, replaced = register_tool(
        "greet", data=b'{"template": "echo new"}', label="t", update=True
    )
    assert replaced and json.loads(path.read_text()) == {"template": "echo new"}

    project, _ = register_tool("greet", data=b'{"template": "echo p"}', label="t", scope="project")
    assert project == roots["project"] / "greet.json"
    assert find_recipe("greet").file == project.resolve()


# --- bounded output ---------------------------------------------------------------------


def test_bounded_tail_keeps_the_last_whole_lines(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_text("a\nb\n")
    assert bounded_tail(small) == ("a\nb\n", False, 4)
    many = tmp_path / "many"
    many.write_text("".join(f"{i}\n" for i in range(1000)))
    text, cut, size = bounded_tail(many, max_lines=200)
    assert cut and text.splitlines()[0] == "800" and text.splitlines()[-1] == "999"
    assert size == many.stat().st_size
    wide = tmp_path / "wide"
    wide.write_text("x" * 100 + "\n" + "y" * 50 + "\n")
    text, cut, _ = bounded_tail(wide, max_bytes=60)
    assert cut and text == "y" * 50 + "\n"  # the partial first line is dropped
    assert bounded_tail(tmp_path / "missing") == ("", False, 0)
    assert bounded_tail(None) == ("", False, 0)

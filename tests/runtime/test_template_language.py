"""The rest of the template language: expressions, repeat, when, delay, output, args."""

from __future__ import annotations

from pathlib import Path

import pytest

import actors
from runtime.compiler.placeholders import missing_values, render_argv, split_words, truthy
from runtime.core.errors import BadInput
from runtime.store.layout import StateRoot
from tests.conftest import cli, snapshot, write_recipe
from tests.runtime.test_executor import run_recipe

VALUES = {
    "x": "hi",
    "empty": "",
    "no": "no",
    "items": ["a", "b", "c"],
    "index": 1,
    "prev": 0,
    "next": 2,
    "repeat": 3,
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{x??fb}", "hi"),
        ("{empty??fb}", "fb"),
        ("{unset??fb}", "fb"),
        ("{no??fb}", "fb"),
        ("{x?yes:no}", "yes"),
        ("{empty?yes:no}", "no"),
        ("{items.length}", "3"),
        ("{items[index]}", "b"),
        ("{items[next]}", "c"),
        ("{items[0]}", "a"),
        ("{index+1}", "2"),
        ("{(index+1)*repeat%4}", "2"),
        ("{_index}", "01"),
        ("{__(index+1)}", "002"),
        ("pre-{x}-{index}", "pre-hi-1"),
    ],
)
def test_expressions(template: str, expected: str) -> None:
    assert render_argv(split_words(template), VALUES) == [expected]


def test_text_that_is_not_an_expression_stays_text() -> None:
    words = split_words("awk '{print $1}' {5} '{a b}' {{x}}")
    assert render_argv(words, {}) == ["awk", "{print $1}", "{5}", "{a b}", "{x}"]


def test_optional_forms_need_no_value_and_arrays_must_be_arrays() -> None:
    assert missing_values(split_words("{a??x} {b?y:z} {index} {c[index]} {d.length}"), {}) == [
        "c",
        "d",
    ]
    assert render_argv(split_words("{items[index]}"), {"items": '["p","q"]', "index": 1}) == ["q"]
    with pytest.raises(BadInput, match="needs an array"):
        render_argv(split_words("{items.length}"), {"items": 5})
    with pytest.raises(BadInput, match="outside items"):
        render_argv(split_words("{items[index]}"), {"items": ["a"], "index": 3})


def test_truthiness() -> None:
    assert not any(truthy(v) for v in (None, "", "false", "0", "no", False, 0, [], {}))
    assert all(truthy(v) for v in ("x", "yes", 1, True, ["a"], "0.5"))


def test_repeat_over_an_array_in_sequence_and_in_parallel(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "args": ["models:array"],
            "template": [
                {
                    "template": "echo {_index}/{repeat} {models[index]} then {models[next]}",
                    "repeat": "{models.length}",
                },
                {"template": "echo worker-{index}", "repeat": 2, "parallel": True, "label": "w"},
            ],
        },
        models="m1,m2,m3",
    )
    assert result["status"] == "done", result
    assert result["output"] == (
        "--- branch: w-0 status: done ---\nworker-0\n--- branch: w-1 status: done ---\nworker-1\n"
    )
    ids = [n["id"] for n in result["nodes"]]
    assert ids[:3] == ["1.1#0", "1.1#1", "1.1#2"]
    sequence = sorted(Path(home.run(result["run"]).dir, "captures").glob("command-00[123]"))
    outputs = [(d / "stdout.log").read_text() for d in sequence]
    assert outputs == ["00/3 m1 then m2\n", "01/3 m2 then m3\n", "02/3 m3 then m1\n"]


def test_when_skips_a_node_and_passes_stdin_through(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "template": [
                "echo kept",
                {"template": "echo replaced", "when": "{deploy??}"},
                {"template": "sed s/^/seen:/", "when": "{mode?on:}"},
            ]
        },
        mode="fast",
    )
    assert result["status"] == "done"
    assert result["output"] == "seen:kept\n"
    skipped = [n for n in result["nodes"] if n["status"] == "skipped"]
    assert [n["id"] for n in skipped] == ["1.2"]


def test_output_picks_the_stream_and_delay_waits(home: StateRoot, tmp_path: Path) -> None:
    result = run_recipe(
        home,
        tmp_path,
        {
            "template": [
                {
                    "template": "sh -c 'echo out; echo err >&2'",
                    "output": "stderr",
                    "delay": "300ms",
                },
                "sed s/^/next-got:/",
            ]
        },
    )
    assert result["output"] == "next-got:err\n"
    assert result["duration_ms"] >= 300


def test_typed_args_are_converted_or_refused_before_anything_is_written(
    home: StateRoot, tmp_path: Path
) -> None:
    path = write_recipe(
        tmp_path,
        "typed",
        {
            "args": {
                "n": {"type": "int"},
                "mode": {"type": "enum", "values": ["a", "b"]},
                "where": {"type": "path", "default": "out"},
            },
            "template": "echo {n} {mode} {where}",
        },
    )
    for bad, why in (("n=x", "n (int): expected an integer"), ("mode=c", "expected one of a, b")):
        before = snapshot(home.path)
        proc = cli("spawn", str(path), "-v", bad, "-v", "mode=a" if "mode" not in bad else "n=1")
        assert proc.returncode == 2 and why in proc.stderr and "Traceback" not in proc.stderr
        assert snapshot(home.path) == before
    record = actors.spawn(str(path), values={"n": "07", "mode": "b"})
    actors.wait(record["run"], timeout=60)
    assert actors.result(record["run"])["output"] == f"7 b {tmp_path / 'out'}\n"


def test_repeat_variables_outside_a_repeat_are_refused(home: StateRoot, tmp_path: Path) -> None:
    path = write_recipe(tmp_path, "loose", {"template": "echo {index+1}"})
    proc = cli("spawn", str(path))
    assert proc.returncode == 2 and "only defined inside a repeat node" in proc.stderr


def test_bad_node_keys_name_their_location(home: StateRoot, tmp_path: Path) -> None:
    for recipe, where in (
        ({"template": [{"template": "true", "repeat": "three"}]}, "template[0].repeat"),
        ({"template": [{"template": "true", "output": "file"}]}, "template[0].output"),
        ({"args": ["m:enum"], "template": "true"}, "args"),
    ):
        path = write_recipe(tmp_path, "bad", recipe)
        proc = cli("spawn", str(path))
        assert proc.returncode == 2 and where in proc.stderr, proc.stderr


def test_args_as_a_comma_string_keep_enum_choices_together(home: StateRoot, tmp_path: Path) -> None:
    path = write_recipe(
        tmp_path, "comma", {"args": "n:int, mode:enum(a,b)", "template": "echo {n} {mode}"}
    )
    record = actors.spawn(str(path), values={"n": "3", "mode": "b"})
    actors.wait(record["run"], timeout=60)
    assert actors.result(record["run"])["output"] == "3 b\n"


def test_imports_splice_another_recipe_with_its_own_values(home: StateRoot, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    write_recipe(
        lib,
        "shout",
        {"defaults": {"word": "hey"}, "template": ["echo {word} from {recipe_dir}", "tr a-z A-Z"]},
    )
    path = write_recipe(
        tmp_path,
        "main",
        {
            "imports": {
                "loud": "lib/shout.json",
                "louder": {"from": "lib/shout.json", "values": {"word": "ho"}},
            },
            "template": [
                {"name": "loud"},
                "cat",
                {"name": "louder", "label": "second"},
            ],
        },
    )
    record = actors.spawn(str(path))
    actors.wait(record["run"], timeout=60)
    result = actors.result(record["run"])
    assert result["status"] == "done", result
    assert result["output"] == f"HO FROM {str(lib).upper()}\n"
    ids = [n["id"] for n in result["nodes"]]
    assert "1.1.1" in ids and "1.3.2" in ids  # imported graphs keep unique ids


def test_import_cycles_depth_and_unknown_aliases_are_refused(
    home: StateRoot, tmp_path: Path
) -> None:
    write_recipe(tmp_path, "a", {"imports": {"b": "b.json"}, "template": [{"name": "b"}]})
    write_recipe(tmp_path, "b", {"imports": {"a": "a.json"}, "template": [{"name": "a"}]})
    before = snapshot(home.path)
    proc = cli("spawn", str(tmp_path / "a.json"))
    assert proc.returncode == 2 and "import cycle" in proc.stderr, proc.stderr
    unknown = write_recipe(tmp_path, "u", {"template": [{"name": "nope"}]})
    proc = cli("spawn", str(unknown))
    assert proc.returncode == 2 and "no import named 'nope'" in proc.stderr
    assert snapshot(home.path) == before

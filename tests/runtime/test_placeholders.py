"""Word splitting and per-word substitution: a value is always exactly one argument."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from runtime.compiler.placeholders import MissingValue, missing_values, render_argv, split_words
from runtime.core.errors import BadInput


def test_split_then_substitute_keeps_values_whole() -> None:
    words = split_words("grep -n {pattern} '{file}' \"x {y}\"")
    assert render_argv(words, {"pattern": "a b; c", "file": "$(rm -rf /)", "y": "z"}) == [
        "grep",
        "-n",
        "a b; c",
        "$(rm -rf /)",
        "x z",
    ]


def test_defaults_and_literal_braces() -> None:
    words = split_words("echo {greeting=hi there} {{literal}} {'not': 'placeholder'} ${{HOME}}")
    assert render_argv(words, {}) == [
        "echo",
        "{greeting=hi",
        "there}",
        "{literal}",
        "{not:",
        "placeholder}",
        "${HOME}",
    ]
    quoted = split_words("echo '{greeting=hi there}'")
    assert render_argv(quoted, {}) == ["echo", "hi there"]


def test_missing_value_names_the_fix() -> None:
    with pytest.raises(MissingValue) as info:
        render_argv(split_words("echo {who}"), {})
    assert "pass -v who=VALUE" in str(info.value)
    assert missing_values(split_words("x {a} {b=1} {a} {c}"), {"c": 1}) == ["a"]


def test_non_string_values_render_as_json_text() -> None:
    words = split_words("x {n} {flag} {items} {none}")
    assert render_argv(words, {"n": 3, "flag": True, "items": [1, "a"], "none": None}) == [
        "x",
        "3",
        "true",
        '[1,"a"]',
        "",
    ]


def test_unbalanced_quotes_and_empty_templates_are_bad_input() -> None:
    with pytest.raises(BadInput, match="cannot split"):
        split_words("echo 'oops")
    with pytest.raises(BadInput, match="empty"):
        split_words("   ")


@given(st.text(max_size=200))
def test_any_value_is_exactly_one_argument(value: str) -> None:
    argv = render_argv(split_words("cmd {v} end"), {"v": value})
    assert argv == ["cmd", value, "end"]

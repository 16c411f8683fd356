"""The hand parser of the hot commands takes only what click would take the same way,
and hands everything else to click."""

from __future__ import annotations

import subprocess
import sys

import pytest

import actors
from actors.cli._fast import _parse, _seconds
from actors.cli.commands import (
    CANCEL_ARGS as _CANCEL,
    EMIT_ARGS as _EMIT,
    KILL_ARGS as _STOP,
    LS_ARGS as _LS,
    MESSAGE_ARGS as _MESSAGE,
    SPAWN_ARGS as _SPAWN,
    STATUS_ARGS as _STATUS,
)
from runtime.store.layout import StateRoot


def test_plain_calls_parse_like_the_click_commands() -> None:
    assert _parse(_MESSAGE, ["run:a", "x.y", "--summary=hi", "--body-json", "{}"]) == {
        "address": "run:a",
        "type": "x.y",
        "body": "{}",
        "body_json": True,
        "force": False,
        "no_fsync": False,
        "as_json": False,
        "summary": "hi",
        "reply_to": None,
        "session": None,
    }
    parsed = _parse(_EMIT, ["x.y", "--deliver", "notify", "--", "-5"])
    assert parsed is not None
    assert (parsed["type"], parsed["body"], parsed["delivery"]) == ("x.y", "-5", "notify")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run:a", "x.y", "-h"],
        ["run:a", "x.y", "--bogus"],
        ["run:a", "x.y", "--summ", "abbreviated"],
        ["run:a", "x.y", "--json=yes"],  # a flag with a value
        ["run:a", "x.y", "--summary"],  # an option without its value
        ["run:a"],  # too few
        ["run:a", "x.y", "b", "extra"],  # too many
    ],
)
def test_anything_unusual_goes_to_click(args: list[str]) -> None:
    assert _parse(_MESSAGE, args) is None


def test_a_bad_choice_goes_to_click_for_its_message() -> None:
    assert _parse(_EMIT, ["x.y", "--level", "loud"]) is None
    assert _parse(_EMIT, ["x.y", "--deliver", "email"]) is None


def test_kill_and_cancel_parse_their_run_and_flags() -> None:
    assert _parse(_STOP, ["run:a", "--force", "--json"]) == {
        "run": "run:a",
        "force": True,
        "as_json": True,
        "session": None,
    }
    parsed = _parse(_CANCEL, ["a", "--grace=0.5"])
    assert parsed is not None and _seconds(parsed["grace"]) == 0.5
    absent = _parse(_CANCEL, ["a"])
    assert absent is not None and absent["grace"] == "5"  # click's default
    assert _seconds("soon") is None  # click reports the bad value
    assert _parse(_STOP, ["a", "--grace", "1"]) is None  # kill has no --grace
    assert _parse(_STOP, []) is None


def test_spawn_collects_repeated_values_and_leaves_wait_to_click() -> None:
    parsed = _parse(_SPAWN, ["-t", "sleep {s}", "-v", "s=1", "--value=x=2", "--secret", "x"])
    assert parsed is not None
    assert (parsed["template"], parsed["values"], parsed["secrets"]) == (
        "sleep {s}",
        ["s=1", "x=2"],
        ["x"],
    )
    assert parsed["recipe"] is None
    assert _parse(_SPAWN, ["hello", "--wait"]) is None  # the progress line is click's
    assert _parse(_SPAWN, ["-t=echo"]) is None  # click would take "=echo"
    assert _parse(_SPAWN, ["-tsleep"]) is None


def test_ls_and_status_parse_their_flags() -> None:
    assert _parse(_LS, ["--status", "running", "--status=done", "--mine", "--json"]) == {
        "statuses": ["running", "done"],
        "mine": True,
        "tree": False,
        "as_json": True,
        "session": None,
    }
    assert _parse(_STATUS, ["--line", "--session", "s1"]) == {
        "run": None,
        "line": True,
        "as_json": False,
        "session": "s1",
        "stdin": False,
        "then": None,
    }
    assert _parse(_STATUS, ["--line", "--stdin", "--then", "echo x"]) == {
        "run": None,
        "line": True,
        "as_json": False,
        "session": None,
        "stdin": True,
        "then": "echo x",
    }
    assert _parse(_LS, ["extra"]) is None  # ls takes no argument: click says so
    assert _parse(_STATUS, ["a", "b"]) is None


# main() with the hand parser switched off: click parses, the same error handling applies
_CLICK = (
    "import sys, actors.cli._fast as fast\n"
    "fast.run = lambda args: False\n"
    "from actors.cli import main\n"
    "main(sys.argv[1:])"
)


@pytest.mark.parametrize(
    "argv",
    [
        ["ls", "--json"],
        ["ls", "--json", "--status", "terminal", "--mine"],
        ["ls", "--status", "sleepy"],
        ["status", "{run}", "--json"],
        ["status", "ghost"],
        ["status"],
    ],
)
def test_ls_and_status_print_the_same_on_both_paths(home: StateRoot, argv: list[str]) -> None:
    record = actors.spawn("hello")
    actors.wait(record["run"], timeout=30)
    args = [a.replace("{run}", record["run"]) for a in argv]
    fast = subprocess.run([sys.executable, "-m", "actors", *args], capture_output=True, text=True)
    slow = subprocess.run([sys.executable, "-c", _CLICK, *args], capture_output=True, text=True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr,
    )
    assert fast.stdout or fast.stderr


def _help(columns: int, *, click_only: bool = False) -> subprocess.CompletedProcess[str]:
    code = (
        "from actors.cli._app import run_click; run_click(['--help'])"
        if click_only
        else "import sys; from actors.cli import main; sys.argv = ['actors', '--help']; main()"
    )
    import os

    env = dict(os.environ, COLUMNS=str(columns))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )


def test_the_help_copy_is_what_click_renders() -> None:
    """actors.cli._help is regenerated whenever a command's line changes
    (python scripts/cli_help.py), or this fails."""
    from actors.cli._help import TOP_HELP

    assert _help(80, click_only=True).stdout == TOP_HELP


@pytest.mark.parametrize("columns", [40, 60, 79, 80, 81, 200])
def test_top_level_help_is_clicks_at_every_width(columns: int) -> None:
    assert _help(columns).stdout == _help(columns, click_only=True).stdout


def test_top_level_help_at_the_usual_width_imports_no_click() -> None:
    from tests.conftest import cli_imports

    loaded, out = cli_imports(["--help"], top_level=True)
    assert out.stdout.startswith("Usage: actors [OPTIONS] COMMAND [ARGS]...")
    assert "click" not in loaded

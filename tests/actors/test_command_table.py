"""The command table (actors.cli.commands) and what is not derived from it stay equal.

The click decorators are not built from the table (that would import click on the
hand-parsed path), so these tests hold them to it: every row resolves to its click
command, and each hand-parsed verb's spec takes exactly the click command's parameters.
Likewise the MCP tools' pydantic models (actors.tool_models) are held to the actors.api
functions they call.
"""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from actors.cli import cli
from actors.cli._fast import _body, _seconds
from actors.cli._options import SECONDS
from actors.cli.commands import FAST, FAST_SUBCOMMANDS, TABLE, Command, FastSpec
from actors.tool_models import TOOLS


def _command(name: str) -> click.Command:
    """The click command of a verb, or of a subcommand (`inbox wait`)."""
    group: click.Command = cli
    for word in name.split():
        assert isinstance(group, click.Group), name
        found = group.get_command(click.Context(group), word)
        assert isinstance(found, click.Command), name
        group = found
    return group


@pytest.mark.parametrize("entry", TABLE, ids=[entry.name for entry in TABLE])
def test_every_row_resolves_to_its_click_command_and_summary(entry: Command) -> None:
    command = _command(entry.name)
    assert command.name == entry.name
    assert command.get_short_help_str(limit=len(entry.summary) + 1) == entry.summary


def _spec_view(spec: FastSpec) -> dict[str, tuple[object, ...]]:
    """What the spec says of each parameter: option strings, takes a value, multiple, ..."""
    seen: dict[str, tuple[object, ...]] = {}
    for position, name in enumerate(spec.positionals):
        seen[name] = ("argument", position < spec.required)
    for opts, takes_value in ((spec.flags, False), (spec.options, True)):
        for name in opts.values():
            strings = tuple(sorted(o for o, n in opts.items() if n == name))
            seen[name] = (strings, takes_value, name in spec.multiple)
    return seen


def _click_view(command: click.Command, spec: FastSpec) -> dict[str, tuple[object, ...]]:
    """The same view of the click command's parameters (those left to click excluded)."""
    seen: dict[str, tuple[object, ...]] = {}
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    for param in arguments:
        seen[str(param.name)] = ("argument", param.required)
    for param in command.params:
        if not isinstance(param, click.Option) or set(param.opts) & set(spec.click_only):
            continue
        assert not param.secondary_opts, "the hand parser takes no --x/--no-x pairs"
        takes_value = not param.is_flag
        seen[str(param.name)] = (tuple(sorted(param.opts)), takes_value, param.multiple)
    return seen


HAND_PARSED = sorted(FAST) + [" ".join(pair) for pair in sorted(FAST_SUBCOMMANDS)]


@pytest.mark.parametrize("name", HAND_PARSED)
def test_each_hand_parsed_spec_takes_exactly_its_click_commands_parameters(name: str) -> None:
    first, _, second = name.partition(" ")
    spec = FAST[name] if name in FAST else FAST_SUBCOMMANDS[(first, second)]
    command = _command(name)
    defaults = command.make_context(name, ["x"] * spec.required).params  # as the body gets them
    assert _spec_view(spec) == _click_view(command, spec)
    assert [p.name for p in command.params if isinstance(p, click.Argument)] == list(
        spec.positionals
    )
    for param in command.params:
        if not isinstance(param, click.Option) or set(param.opts) & set(spec.click_only):
            continue
        key = str(param.name)
        if isinstance(param.type, click.Choice):
            assert spec.choices[key] == tuple(param.type.choices)
        else:
            assert key not in spec.choices
        if key in spec.seconds:
            default = spec.defaults.get(key)
            assert param.type is SECONDS  # the one seconds rule, as _fast applies it
            assert defaults[key] == (None if default is None else _seconds(default))
        elif not param.is_flag and not param.multiple:
            assert spec.defaults.get(key) == defaults[key], key
    for opt in spec.click_only:  # left to click, so click must know it
        assert any(opt in p.opts for p in command.params if isinstance(p, click.Option))


@pytest.mark.parametrize("name", HAND_PARSED)
def test_each_hand_parsed_verb_has_a_callable_body(name: str) -> None:
    first, _, second = name.partition(" ")
    spec = FAST[name] if name in FAST else FAST_SUBCOMMANDS[(first, second)]
    assert callable(_body(spec.body))


def test_version_is_served_without_click_or_package_metadata() -> None:
    probe = (
        "import sys; sys.argv = ['actors', '--version']\n"
        "from actors.cli import main\n"
        "main()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'click'"
        " or m.startswith('importlib.metadata')))"
    )
    fast = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    click_path = (
        "import sys, actors.cli._fast as fast\n"
        "fast.run = lambda args: False\n"
        "from actors.cli import main\n"
        "main(['--version'])"
    )
    slow = subprocess.run([sys.executable, "-c", click_path], capture_output=True, text=True)
    assert fast.returncode == slow.returncode == 0, (fast.stderr, slow.stderr)
    version_line, loaded = fast.stdout.splitlines()
    assert loaded == "[]"
    assert version_line + "\n" == slow.stdout
    import actors

    assert version_line == f"actors, version {actors.__version__}"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_each_mcp_tool_takes_the_parameters_of_the_api_function_it_calls(name: str) -> None:
    """The tool's fields are that function's parameters (with the same defaults), and
    every parameter the function requires is a field."""
    import inspect

    from actors import api

    tool = TOOLS[name]
    if tool.api is None:
        assert not hasattr(api, name)  # an MCP-only tool has no API verb to follow
        return
    params = inspect.signature(getattr(api, tool.api)).parameters
    fields = {
        tool.renames.get(field, field): info
        for field, info in tool.model.model_fields.items()
        if field not in tool.presentation
    }
    assert set(fields) <= set(params), set(fields) - set(params)
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    assert required <= set(fields), required - set(fields)
    for key, info in fields.items():
        if info.default_factory is None and not info.is_required():
            assert info.default == params[key].default, key

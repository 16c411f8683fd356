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
from tests.conftest import cli, cli_imports, snapshot, write_recipe


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
    from runtime.views.inspect import LINES, MAX_LINES

    option = next(p for p in inspect_cmd.params if p.name == "lines")
    assert isinstance(option.type, click.IntRange)
    assert (option.default, option.type.min, option.type.max) == (LINES, 0, MAX_LINES)
    for function in (actors.api.inspect, actors.api.inspect_text):
        assert pyinspect.signature(function).parameters["lines"].default == LINES
    field = InspectParams.model_fields["lines"]
    assert field.default == LINES
    bounds = {type(m).__name__: m for m in field.metadata}
    assert (bounds["Ge"].ge, bounds["Le"].le) == (0, MAX_LINES)


# --- point 10: one CLI grammar ------------------------------------------------------------


def _click_commands() -> list[tuple[str, Any]]:
    """Every click command, group subcommands included, by its full name."""
    import click

    from actors.cli import COMMANDS, cli

    ctx = click.Context(cli)
    found = []
    todo = [(name, cli.get_command(ctx, name)) for name in COMMANDS]
    while todo:
        name, command = todo.pop()
        found.append((name, command))
        if isinstance(command, click.Group):
            todo += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
    return found


def test_json_means_print_json_on_every_command() -> None:
    """A class-of-defect check: no command may spell `--json` for anything but printing
    JSON (a JSON body is `--body-json`)."""
    offenders = []
    for name, command in _click_commands():
        for param in command.params:
            if "--json" in getattr(param, "opts", ()) and param.name != "as_json":
                offenders.append(f"{name}: --json -> {param.name}")
            if "--print-json" in getattr(param, "opts", ()):
                offenders.append(f"{name}: --print-json")
    assert not offenders, offenders
    for verb in ("tail", "inbox wait", "message", "emit", "wait", "ls", "status", "result"):
        params = dict(_click_commands())[verb].params
        assert any(p.name == "as_json" for p in params), verb


def test_message_and_emit_print_json_and_take_a_json_body_by_name(
    home: StateRoot, tmp_path: Path
) -> None:
    sink = write_recipe(
        tmp_path,
        "sink",
        {
            "mailbox": {"accepts": ["job.go"]},
            "template": "actors emit note.x '{\"a\": 1}' --body-json --json",
        },
    )
    run_id = actors.spawn(str(sink))["run"]
    actors.wait(run_id, timeout=60)
    emitted = json.loads(actors.result(run_id)["output"])
    assert emitted["type"] == "note.x" and emitted["state"] == "emitted"
    outbox = actors.inspect(run_id, "messages")["messages"]
    assert [m["body"] for m in outbox if m["type"] == "note.x"] == [{"a": 1}]
    live = actors.spawn(template="sleep 30")["run"]
    sent = cli("message", live, "job.go", '{"n": 2}', "--body-json", "--json", "--force")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["state"] == "queued"
    as_text = cli("message", live, "job.go", '{"n": 2}', "--force")
    assert as_text.stdout.startswith("to=run:")
    # an old script's `BODY --json` (the body-is-JSON meaning of before): sent as text,
    # as asked, with one line on stderr saying how to send JSON
    old = cli("message", live, "job.go", '{"n": 3}', "--json", "--force")
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout)["state"] == "queued"
    assert old.stderr.count("\n") == 1 and "--body-json" in old.stderr, old.stderr
    plain = cli("message", live, "job.go", "not json", "--json", "--force")
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    inbox = Path(actors.status(live)["state_dir"], "inbox.jsonl").read_text().splitlines()
    bodies = [json.loads(line)["envelope"]["body"] for line in inbox]
    assert bodies == [{"n": 2}, '{"n": 2}', '{"n": 3}', "not json"], bodies
    actors.kill(live)


def test_every_command_that_takes_a_run_accepts_id_and_run_id_alike(home: StateRoot) -> None:
    run_id = actors.spawn(template="echo hi")["run"]
    actors.wait(run_id, timeout=60)
    for argv in (
        ["status", "{}", "--json"],
        ["tail", "{}"],
        ["result", "{}", "--json"],
        ["wait", "{}", "--json"],
        ["inspect", "{}", "--json"],
        ["inspect", "{}", "--view", "files", "--json"],
    ):
        outputs = []
        for ref in (run_id, f"run:{run_id}"):
            proc = cli(*[a.replace("{}", ref) for a in argv])
            assert proc.returncode == 0, (argv, ref, proc.stderr)
            outputs.append(proc.stdout)
        assert outputs[0] == outputs[1], argv
    live = actors.spawn(template="sleep 30")["run"]
    for ref in (live, f"run:{live}"):
        sent = cli("message", ref, "note.x", "hi", "--force", "--json")
        assert json.loads(sent.stdout)["to"] == f"run:{live}", sent.stderr
    assert cli("kill", live).returncode == 0
    assert cli("archive", f"run:{run_id}").returncode == 0


def test_wait_takes_several_runs_and_exits_with_the_worst(home: StateRoot) -> None:
    three = actors.spawn(template="sh -c 'exit 3'")["run"]
    fine = actors.spawn(template="true")["run"]
    five = actors.spawn(template="sh -c 'exit 5'")["run"]
    proc = cli("wait", three, f"run:{fine}", five)
    assert proc.returncode == 5, proc.stderr
    assert [line.split()[:2] for line in proc.stdout.splitlines()] == [
        [f"run:{three}", "failed"],
        [f"run:{fine}", "done"],
        [f"run:{five}", "failed"],
    ]
    both = cli("wait", fine, three, "--json")
    assert both.returncode == 3
    assert [s["run"] for s in json.loads(both.stdout)] == [fine, three]
    assert cli("wait", fine).returncode == 0
    slow = actors.spawn(template="sleep 30")["run"]
    timed_out = cli("wait", fine, slow, "--timeout", "0.5")
    assert timed_out.returncode == 75 and f"run:{slow} still running" in timed_out.stderr
    ghost = cli("wait", fine, "ghost")
    assert ghost.returncode == 2 and "ghost" in ghost.stderr and ghost.stdout == ""
    actors.kill(slow)


def test_ls_shows_the_command_of_a_template_run(home: StateRoot) -> None:
    run_id = actors.spawn(template="sh -c 'exit 0' 'a b'")["run"]
    hello = actors.spawn("hello")["run"]
    for r in (run_id, hello):
        actors.wait(r, timeout=60)
    rows = {line.split()[0]: line for line in cli("ls").stdout.splitlines()[1:]}
    # RUN STATUS STARTED DURATION CODE, then the recipe or the command as typed
    assert rows[run_id].split(None, 5)[5] == "sh -c 'exit 0' 'a b'"
    assert rows[hello].split()[5] == "hello"
    listed = {r["run"]: r for r in json.loads(cli("ls", "--json").stdout)}
    assert listed[run_id]["command"] == "sh -c 'exit 0' 'a b'"
    assert listed[hello]["command"] is None
    assert "sh -c 'exit 0' 'a b'" in cli("ls", "--tree").stdout


def test_tail_and_inbox_wait_print_json(home: StateRoot) -> None:
    run_id = actors.spawn(template="printf 'one\\ntwo\\n'")["run"]
    actors.wait(run_id, timeout=60)
    tail = json.loads(cli("tail", run_id, "-n", "1", "--json").stdout)
    assert tail == {"run": run_id, "stream": "stdout", "lines": ["two"]}
    events = json.loads(cli("tail", run_id, "--events", "--json").stdout)
    assert events["stream"] == "events" and events["lines"][-1]["event"] == "run.done"
    refused = cli("tail", run_id, "--json", "-f")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    cli("session", "register", "--harness", "file", "--id", "coord-json")
    env = {"ACTORS_SESSION": "coord-json"}
    assert cli("spawn", "-t", "true", env=env).returncode == 0
    woke = cli("inbox", "wait", "--json", "--timeout", "60", env=env)
    assert woke.returncode == 0, woke.stderr
    data = json.loads(woke.stdout)
    assert data["session"] == "coord-json" and data["unread"] == 1
    assert data["followups"][0]["type"] == "run.done"
    assert data["read_with"] == "actors inbox read --session coord-json"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_come_from_the_command_table(home: StateRoot, shell: str) -> None:
    script = cli("completion", shell)
    assert script.returncode == 0 and "_ACTORS_COMPLETE" in script.stdout
    run_id = actors.spawn(template="true")["run"]
    actors.wait(run_id, timeout=60)
    kind = {"bash": "bash_complete", "zsh": "zsh_complete", "fish": "fish_complete"}[shell]

    def complete(words: str, cword: int) -> str:
        env = {"_ACTORS_COMPLETE": kind, "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        if shell == "fish":
            env["COMP_CWORD"] = words.split()[-1]
        return cli(env=env).stdout

    assert "wait" in complete("actors wa", 1) and "watch" in complete("actors wa", 1)
    assert "completion" in complete("actors comp", 1)
    assert run_id in complete(f"actors tail {run_id[:4]}", 2)


def test_bash_loads_the_completion_script(home: StateRoot) -> None:
    import shutil

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    import subprocess

    loaded = subprocess.run(
        ["bash", "-c", f'eval "$({sys.executable} -m actors completion bash)"; complete -p actors'],
        capture_output=True,
        text=True,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "_actors_completion" in loaded.stdout


def _in_pty(
    argv: list[str], env: dict[str, str], *, stdout_too: bool = True
) -> tuple[str, str, int]:
    """Run `argv` with stderr (and stdout, unless not `stdout_too`) on a real pseudo
    terminal; returns (what the terminal showed, piped stdout, exit status)."""
    import pty
    import select
    import subprocess
    import time

    master, slave = pty.openpty()
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=slave if stdout_too else subprocess.PIPE,
        stderr=slave,
        env=env,
        start_new_session=True,
    ) as proc:
        os.close(slave)
        shown = b""
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1)
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the terminal closed it
                    break
                if not chunk:
                    break
                shown += chunk
            piped = proc.stdout.read() if proc.stdout else b""
            code = proc.wait(timeout=60)
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
    return shown.decode(), piped.decode(), code


def test_colour_only_on_a_terminal_and_never_with_no_color(home: StateRoot) -> None:
    done = actors.spawn(template="true")["run"]
    failed = actors.spawn(template="false")["run"]
    # quoted: its `;` is part of the escape sequence, not a shell operator
    nasty = actors.spawn(template="echo 'Z\x1b]0;pwned\x07\x1b[2JEND'")["run"]
    for r in (done, failed, nasty):
        actors.wait(r, timeout=60)
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    shown, _, code = _in_pty([sys.executable, "-m", "actors", "ls"], env)
    assert code == 0
    assert "\x1b[32mdone" in shown and "\x1b[31mfailed" in shown
    import re

    # actors' own colours are the only escape sequences; a command's ESC is shown inert
    assert "\x1b" not in re.sub(r"\x1b\[(?:3[1-6]|2|0)m", "", shown)
    assert "Z\\x1b]0;pwned\\x07\\x1b[2JEND" in shown
    status, _, _ = _in_pty([sys.executable, "-m", "actors", "status", failed], env)
    assert "\x1b[31mfailed" in status
    plain, _, _ = _in_pty([sys.executable, "-m", "actors", "ls"], {**env, "NO_COLOR": "1"})
    assert "\x1b" not in plain and "done" in plain
    piped = cli("ls", env={"NO_COLOR": ""})
    assert "done" in piped.stdout and "\x1b[0m" not in piped.stdout  # never coloured
    as_json, _, _ = _in_pty([sys.executable, "-m", "actors", "ls", "--json"], env)
    assert "\x1b" not in as_json


def test_wait_and_inbox_wait_draw_one_progress_line_on_a_terminal_only(home: StateRoot) -> None:
    slow = actors.spawn(template="sleep 2")["run"]
    env = dict(os.environ)
    shown, piped, code = _in_pty(
        [sys.executable, "-m", "actors", "wait", slow], env, stdout_too=False
    )
    assert code == 0
    assert f"\r  {slow}: running" in shown  # redrawn in place on stderr
    assert shown.rstrip(" ").endswith("\r")  # and wiped before the result is printed
    assert piped == f"run:{slow}  done\n"  # stdout is a pipe: no colour, no progress
    again = cli("wait", slow)
    assert "\r" not in again.stderr and again.stderr == ""
    cli("session", "register", "--harness", "file", "--id", "coord-tty")
    shown, piped, code = _in_pty(
        [
            sys.executable,
            "-m",
            "actors",
            "inbox",
            "wait",
            "--session",
            "coord-tty",
            "--timeout",
            "1.5",
        ],
        env,
        stdout_too=False,
    )
    assert code == 75 and piped == ""
    assert "\r  waiting for follow-ups to coord-tty: 0s" in shown
    quiet = cli("inbox", "wait", "--session", "coord-tty", "--timeout", "0.2")
    assert quiet.returncode == 75 and quiet.stderr == ""


def test_version_loads_no_more_than_message() -> None:
    """`--version` takes the hand-parsed path with the version from actors._version:
    every module it loads is one `message` loads too (so it is never the slower one)."""
    version, _ = cli_imports(["--version"])
    message, _ = cli_imports(["message", "run:ghost", "x.y"])
    assert version - {"actors._version"} <= message, sorted(version - message)
    assert "click" not in version and "importlib.metadata" not in version


def _command_paths() -> list[list[str]]:
    """Every command and subcommand of the click group, as argv prefixes."""
    import click

    from actors.cli._app import cli as group

    found: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                sub = command.get_command(click.Context(command), name)
                assert sub is not None
                walk(sub, [*path, name])
        else:
            found.append(path)

    walk(group, [])
    return [path for path in found if path[:1] != ["hook"]]  # a hook never fails its harness


def test_every_usage_error_is_one_line_naming_the_command_and_changes_nothing(
    home: StateRoot,
) -> None:
    """docs/cli.md: bad input is one readable line naming what is wrong and how to fix it,
    exit status 2. click's own usage errors were a three-line block (usage, a help hint,
    a blank line, then the error); an unknown option, a missing value and an extra
    argument are each one line now, on every command, and write nothing."""
    paths = _command_paths()
    assert len(paths) > 30
    before = snapshot(home.path)
    for path in paths:
        for bad in (["--no-such-option-x"], ["--json=\x1b[31mred"]):
            proc = cli(*path, *bad)
            where = " ".join(["actors", *path])
            lines = proc.stderr.splitlines()
            assert proc.returncode == 2, (path, bad, proc.returncode, proc.stderr)
            assert len(lines) == 1 and proc.stdout == "", (path, bad, proc.stderr, proc.stdout)
            assert lines[0].startswith("actors: "), lines
            if path != ["run"]:  # `run TOOL --its-options`: the tool's own refusal
                assert lines[0].endswith(f"; see `{where} --help`"), lines
    proc = cli("nosuchverb")
    assert proc.stderr == "actors: no such command 'nosuchverb'; see `actors --help`\n"
    proc = cli("ls", "extra")
    assert proc.stderr.splitlines() == [
        "actors: got unexpected extra argument (extra); see `actors ls --help`"
    ]
    after = snapshot(home.path)
    assert after == before

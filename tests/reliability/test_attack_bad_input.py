"""Issue 17 #10 (legal input never crashes a run) and #11 (bad input: one line, exit 2,
nothing written; every JSON-RPC request answered).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, idle_run, write_recipe
from tests.reliability._checks import assert_clean, describe, refused, tree

# -- #11 bad environment ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["emit", "note.x"],
        ["kill", "{r}"],
        ["message", "run:{r}", "job.item"],
        ["recv", "--timeout", "0.1"],
    ],
    ids=["emit", "kill", "message", "recv"],
)
@pytest.mark.parametrize("token", ["é", "tok\u2603en"], ids=["e-acute", "snowman"])
def test_a_non_ascii_run_token_is_refused_in_one_line(
    home: StateRoot, tmp_path: Path, args: list[str], token: str
) -> None:
    run = idle_run(tmp_path)
    args = [a.replace("{r}", run["run"]) for a in args]
    before = tree(home.path)
    refused(args, cli(*args, env={"ACTORS_RUN_ID": run["run"], "ACTORS_RUN_TOKEN": token}))
    assert tree(home.path) == before
    assert actors.status(run["run"])["status"] == "running"


@pytest.mark.parametrize("cap", ["abc", "1e3", "4MiB"])
@pytest.mark.parametrize("verb", ["spawn", "message"])
def test_a_malformed_journal_cap_is_refused_in_one_line(
    home: StateRoot, tmp_path: Path, cap: str, verb: str
) -> None:
    if verb == "message":
        run = idle_run(tmp_path)
        args = ["message", f"run:{run['run']}", "job.item"]
    else:
        args = ["spawn", "hello", "--as", "run:capped"]
    before = tree(home.path)
    refused(args, cli(*args, env={"ACTORS_JOURNAL_CAP_BYTES": cap}), "ACTORS_JOURNAL_CAP_BYTES")
    assert tree(home.path) == before


def test_a_malformed_kill_grace_is_refused_or_harmless(home: StateRoot) -> None:
    args = ["spawn", "-t", "true", "--as", "run:grace", "--wait"]
    proc = cli(*args, env={"ACTORS_KILL_GRACE": "abc"})
    assert_clean(args, proc, allowed=(0, 2))
    if proc.returncode == 0:
        assert actors.status("grace")["status"] == "done"
    else:
        assert not (home.runs / "grace").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["ls"],
        ["ls", "--json"],
        ["reconcile"],
        ["session", "ls"],
        ["inbox", "read"],
        ["status", "--line"],
    ],
    ids=["ls", "ls-json", "reconcile", "session-ls", "inbox-read", "status-line"],
)
def test_an_actors_home_that_is_a_file_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    afile = tmp_path / "not-a-dir"
    afile.write_text("x")
    monkeypatch.setenv("ACTORS_HOME", str(afile))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    for name in ("ACTORS_SESSION", "ACTORS_RUN_ID", "ACTORS_RUN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    refused(args, cli(*args), str(afile))
    assert afile.read_text() == "x"


# -- #11 a runner that cannot be started --------------------------------------------------------


@pytest.fixture
def no_fork_cgroup() -> Iterator[Path]:
    """A pids cgroup (v1) that holds one process: whatever runs in it cannot fork. (Tests
    run as root, which RLIMIT_NPROC does not bind; the pids controller does.)"""
    base = Path("/sys/fs/cgroup/pids")
    if not (base / "cgroup.procs").exists() or not os.access(base, os.W_OK):
        pytest.skip("no writable pids cgroup to make fork fail")
    group = base / f"actors-attack-{os.getpid()}"
    group.mkdir(exist_ok=True)
    (group / "pids.max").write_text("1")
    yield group
    group.rmdir()


def _cli_without_fork(group: Path, *args: str) -> subprocess.CompletedProcess[str]:
    def enter() -> None:
        with open(group / "cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))

    return subprocess.run(
        [sys.executable, "-m", "actors", *args],
        preexec_fn=enter,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["spawn", "hello", "--as", "run:phantom"],
        ["spawn", "-t", "sleep 1", "--as", "run:phantom"],
    ],
    ids=["recipe", "template"],
)
def test_a_spawn_whose_runner_cannot_fork_refuses_and_leaves_no_run(
    home: StateRoot, no_fork_cgroup: Path, args: list[str]
) -> None:
    proc = _cli_without_fork(no_fork_cgroup, *args)
    refused(args, proc)
    assert not (home.runs / "phantom").exists(), "a phantom run was left behind"
    assert actors.runs() == []


def test_a_tool_message_whose_runner_cannot_fork_refuses_and_leaves_no_run(
    home: StateRoot, no_fork_cgroup: Path
) -> None:
    args = ["message", "tool:hello", "tool.invoke", '{"name": "x"}', "--body-json"]
    proc = _cli_without_fork(no_fork_cgroup, *args)
    refused(args, proc)
    assert actors.runs() == [], "a phantom run was left behind"


# -- #11 MCP: every request gets a response -----------------------------------------------------


def _mcp(lines: list[str]) -> dict[int, dict[str, object]]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "attack", "version": "1"},
        },
    }
    payload = "\n".join(
        [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}', *lines]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "actors", "mcp"],
        input=payload + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    answers = {}
    for line in proc.stdout.splitlines():
        message = json.loads(line)
        if "id" in message:
            answers[message["id"]] = message
    return answers


SURROGATE_REQUESTS = {
    "tool-argument": '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"message","arguments":{"to":"run:x","type":"a.b","body":"\\ud800"}}}',
    "target": '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"inspect","arguments":{"target":"run:\\ud800"}}}',
    "spawn-value": '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"spawn","arguments":{"template":"echo {v}","values":{"v":"\\udfff"}}}}',
    "method": '{"jsonrpc":"2.0","id":7,"method":"ping\\ud800"}',
}


@pytest.mark.parametrize(
    "request_line", list(SURROGATE_REQUESTS.values()), ids=list(SURROGATE_REQUESTS)
)
def test_every_mcp_request_with_a_lone_surrogate_gets_a_response(
    home: StateRoot, request_line: str
) -> None:
    answers = _mcp([request_line, '{"jsonrpc":"2.0","id":8,"method":"ping"}'])
    assert 8 in answers, "the server stopped answering"
    assert 7 in answers, "the request with a lone surrogate got no response"
    assert "error" in answers[7] or answers[7].get("result", {}).get("isError")  # type: ignore[union-attr]


# -- #11 a number of seconds is one rule: finite, 0 to poll(2)'s longest wait --------------

_BAD_SECONDS = ["nan", "inf", "1e308", "3000000", "-1"]
"""NaN, infinite, past poll(2)'s 2**31 - 1 ms (a month), negative: each once reached a
poll as it was and ended in an internal error (or a run's runner error) there."""


@pytest.mark.parametrize("seconds", _BAD_SECONDS)
@pytest.mark.parametrize(
    "args",
    [
        ["inbox", "wait", "--timeout"],
        ["inbox", "wait", "--session", "s1", "--timeout"],  # the hand-parsed path
        ["watch", "--timeout"],
        ["wait", "{r}", "--timeout"],
        ["cancel", "{r}", "--grace"],
        ["cancel", "{r}", "--json", "--grace"],  # hand-parsed too
    ],
    ids=["inbox-wait", "inbox-wait-fast", "watch", "wait", "cancel", "cancel-fast"],
)
def test_a_seconds_option_out_of_range_is_refused_in_one_line(
    home: StateRoot, tmp_path: Path, args: list[str], seconds: str
) -> None:
    """--timeout and --grace are a number of seconds from 0 to 2147483, like every seconds
    setting (docs/cli.md, *One grammar*): anything else is one line, exit 2, and the run
    it names is left running."""
    run = idle_run(tmp_path)
    argv = [a.replace("{r}", run["run"]) for a in args] + [seconds]
    before = tree(home.path)
    refused(argv, cli(*argv, timeout=30), seconds, "seconds from 0 to 2147483")
    assert tree(home.path) == before
    assert actors.status(run["run"])["status"] == "running"


def test_a_seconds_setting_past_polls_longest_wait_is_refused_before_a_run_starts(
    home: StateRoot,
) -> None:
    """ACTORS_KILL_GRACE=3e6 was taken (finite, >= 0), and the runner's poll for the grace
    failed: the run ended `failed` with `runner error: OverflowError`. Now the setting is
    refused before anything is written."""
    args = ["spawn", "-t", "sleep 30", "--as", "run:graceful"]
    refused(args, cli(*args, env={"ACTORS_KILL_GRACE": "3e6"}), "ACTORS_KILL_GRACE")
    assert tree(home.runs) == set()


def test_an_adapter_seconds_option_past_polls_longest_wait_is_refused(home: StateRoot) -> None:
    """An adapter's seconds options (a webhook's `timeout`, tmux's `enter_delay`) follow
    the same rule: `inf` passed the old `>= 0` check and waited forever, or failed later
    in a delivery's poll."""
    args = ["session", "register", "--harness", "webhook", "--id", "s1", "--no-check"]
    for value in ("inf", "1e308", "nan"):
        argv = [*args, "-o", "url=http://127.0.0.1:9/hook", "-o", f"timeout={value}"]
        refused(argv, cli(*argv), "timeout", "seconds from 0 to 2147483")
    assert tree(home.path / "sessions") == set()


def test_a_negative_tail_line_count_is_refused(home: StateRoot, tmp_path: Path) -> None:
    run = idle_run(tmp_path)
    args = ["tail", run["run"], "-n", "-3"]
    refused(args, cli(*args), "-n")


def test_an_api_timeout_out_of_range_is_an_actors_error(home: StateRoot, tmp_path: Path) -> None:
    """actors.wait / actors.recv take the CLI's rule: NaN reached a poll (ValueError)."""
    run = idle_run(tmp_path)
    for bad in (float("nan"), float("inf"), -1.0, 1e308):
        with pytest.raises(actors.ActorsError, match="seconds from 0 to 2147483"):
            actors.wait(run["run"], timeout=bad)
    assert actors.status(run["run"])["status"] == "running"


@pytest.mark.parametrize("duration", [3_000_000_000, 1e308, "999999h"], ids=["35d", "1e308", "h"])
def test_a_recipe_delay_past_polls_longest_wait_parks_the_run(
    home: StateRoot, tmp_path: Path, duration: object
) -> None:
    """A recipe's `delay` (like its `timeout`) may be any length (docs/recipes.md): a
    delay past poll's 2**31 - 1 ms made the parked runner die in its poll (the run ended
    `exited`, `pid is gone`). It waits now, in steps, and a kill still ends it at once."""
    recipe = write_recipe(
        tmp_path, "later", {"template": [{"label": "a", "template": "true", "delay": duration}]}
    )
    record = actors.spawn(str(recipe))
    run = record["run"]
    args = ["wait", run, "--timeout", "5"]
    proc = cli(*args)  # the runner's pidfd wakes it at once if it dies
    assert proc.returncode == 75, describe(args, proc)
    assert actors.status(run)["status"] == "running"
    assert_clean(["kill", run], cli("kill", run))
    assert actors.status(run)["status"] == "killed"


@pytest.mark.parametrize("then", [[], ["--then", "echo theirs"]], ids=["ours", "then"])
def test_a_status_line_whose_stdin_stays_silent_ends_on_its_own(
    home: StateRoot, tmp_path: Path, then: list[str]
) -> None:
    """`status --line --stdin` reads the harness's JSON; a stdin left open and silent held
    it (and the harness's status line) forever. It is bounded like a hook's input: after
    ACTORS_HOOK_LOCK_WAIT the line is drawn as for no input (docs/cli.md, *status*)."""
    fifo = tmp_path / "silent"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR)  # a writer that never writes nor closes
    try:
        with open(fifo, "rb") as silent:
            args = [sys.executable, "-m", "actors", "status", "--line", "--stdin", *then]
            env = dict(os.environ, ACTORS_HOOK_LOCK_WAIT="0.5")
            proc = subprocess.run(
                args, stdin=silent, capture_output=True, text=True, env=env, timeout=60
            )
    finally:
        os.close(keep)
    assert_clean(args, proc, allowed=(0,))
    assert proc.stdout == ("theirs\n" if then else ""), proc.stdout


@pytest.mark.parametrize("kind", ["fifo", "dir"])
@pytest.mark.parametrize(
    "verb", [["spawn"], ["spawn", "--recipe"], ["recipes", "show"], ["recipes", "check"]]
)
def test_a_recipe_path_that_is_no_file_is_named_for_what_it_is(
    home: StateRoot, tmp_path: Path, kind: str, verb: list[str]
) -> None:
    """A recipe path that exists but is a FIFO or a directory was refused as `does not
    exist; check the path` (or `no such file`): the one line must say what is wrong. It is
    never opened for a blocking read either."""
    path = tmp_path / "r.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    args = [*verb, str(path)]
    proc = cli(*args, timeout=30)
    if verb == ["recipes", "check"]:  # one line per file, then the count on stderr
        assert proc.returncode == 2 and proc.stdout == f"{path}: not a regular file\n", proc
    else:
        refused(args, proc, "is not a regular file")
    assert tree(home.runs) == set()


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_a_blank_summary_is_the_type(home: StateRoot, tmp_path: Path, blank: str) -> None:
    """`summary` defaults to the type (docs/messaging.md, *Envelopes*): an empty or blank
    `--summary` was stored as it was, and a mailbox listing or a follow-up then showed an
    empty line where the message should be named."""
    run = idle_run(tmp_path)
    args = ["message", run["run"], "job.item", "x", "--summary", blank]
    assert_clean(args, cli(*args), allowed=(0,))
    view = json.loads(cli("inspect", run["run"], "--view", "mailbox", "--json").stdout)
    assert [e["summary"] for e in view["entries"]] == ["job.item"], view


@pytest.mark.parametrize("ident", ["run:parent", "user:a:b"])
def test_session_register_refuses_an_id_no_session_may_be_named_by(
    home: StateRoot, ident: str
) -> None:
    """`--session` and `$ACTORS_SESSION` refuse `run:<id>` (a run's principal is proven by
    its token) and a `user:` id that is not one; `session register --id` wrote such a
    record and printed `export ACTORS_SESSION=run:parent`, which every command then
    refused. The same rule now refuses it first, writing nothing."""
    args = ["session", "register", "--harness", "file", "--id", ident]
    refused(args, cli(*args), "invalid session id")
    assert tree(home.path / "sessions") == set()


def test_metrics_output_never_replaces_a_fifo_or_a_device(home: StateRoot, tmp_path: Path) -> None:
    """`metrics --output FILE` renames a temporary file over FILE: over a FIFO a reader
    waits on, or (as root) over /dev/null, that put a regular file in its place. Only a
    regular file is replaced; anything else is one line, exit 2, left as it was."""
    import stat

    fifo = tmp_path / "metrics.prom"
    os.mkfifo(fifo)
    args = ["metrics", "--output", str(fifo)]
    refused(args, cli(*args), "is not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".metrics")] == []
    regular = tmp_path / "actors.prom"
    assert_clean(args, cli("metrics", "--output", str(regular)), allowed=(0,))
    assert regular.read_text().startswith("# HELP")


# -- #11 the one line stays one line, whatever it quotes ------------------------------------

_FORGED = "x\nactors: forged second line\x1b]0;retitled\x07\u202e"
"""What a caller types (or a file holds) that an error line quotes back: a newline that
would forge a second `actors:` line, an OSC that retitles a terminal, a bidi override."""


@pytest.mark.parametrize(
    "args",
    [
        ["recipes", "show", _FORGED],
        ["metrics", "--output", f"/nonexistent-{_FORGED}/metrics.prom"],
        ["dashboard", "--host", _FORGED],
        ["run", "hello", f"--{_FORGED}", "v"],
        ["message", "tool:hello", "tool.invoke", json.dumps({_FORGED: 1}), "--body-json"],
    ],
    ids=["recipe-name", "metrics-output", "dashboard-host", "run-option", "tool-body-key"],
)
def test_an_error_quoting_what_was_typed_is_one_inert_line(
    home: StateRoot, args: list[str]
) -> None:
    """Bad input: exactly one line, exit 2, nothing written, even when the message quotes
    the input (a recipe name, a path, a host, a parameter) and the input holds a newline or
    a terminal escape: they are shown escaped (docs/cli.md, *Exit status*)."""
    proc = cli(*args)
    line = refused(args, proc, "\\n", "\\x1b", "\\u202e")
    assert not any(c in line for c in "\x1b\x07\u202e"), line
    assert tree(home.runs) == set()


def test_an_api_error_quoting_what_was_given_is_one_line(home: StateRoot) -> None:
    """The Python API and the MCP tools raise the same ActorsError: str(err) is the one
    line a caller (or a model) gets, escaped the same way (here a `tool:` message, the MCP
    `message` tool's path, whose refusal names the parameter it was given)."""
    with pytest.raises(actors.ActorsError) as caught:
        actors.message("tool:hello", "tool.invoke", {_FORGED: 1})
    text = str(caught.value)
    assert "\n" not in text and "\x1b" not in text and "\\n" in text, text
    assert tree(home.runs) == set()


# -- #10 legal input never crashes a run --------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "size"), [(9, 120_000), (300, 4_000)], ids=["nine-120KB-args", "300-4KB-args"]
)
def test_large_legal_arguments_never_crash_the_runner(
    home: StateRoot, tmp_path: Path, count: int, size: int
) -> None:
    names = [f"a{i}" for i in range(count)]
    recipe = write_recipe(
        tmp_path, "big", {"template": "true " + " ".join(f"{{{n}}}" for n in names)}
    )
    values = {n: "x" * size for n in names}
    try:
        record = actors.spawn(str(recipe), as_="big", values=values)
    except actors.ActorsError:
        assert not (home.runs / "big").exists()  # refused up front: acceptable
        return
    summary = finished(record)
    assert summary["status"] == "done", summary


def test_flush_of_a_delivery_the_session_never_had_is_refused(home: StateRoot) -> None:
    """`flush --delivery ID` names one delivery: an id the session never had (a typo, a
    path) was "nothing to flush" with exit 0, as if it had been delivered already."""
    for bad in ("../x", "d-never", "\x1b[31m"):
        proc = cli("flush", "--session", "s-flush", "--delivery", bad)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "has no delivery" in lines[0], proc.stderr
        assert "\x1b" not in proc.stderr
    assert not (home.sessions / "s-flush").exists()

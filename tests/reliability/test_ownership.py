"""Ownership and isolation: sessions, sibling runs, planted symlinks, modes, secrets.

- another session's run is refused for message / cancel / kill / archive / prune without
  `--force`, and the refusal changes nothing; with `--force` it is allowed;
- a run's children act as `run:<id>` through its token (runtime/runs/ownership.py): they can
  act on their own run and the runs they spawned, never on a sibling, and cannot borrow
  a session or forge another run's identity;
- symlinks planted in the state tree are never followed for a read that could leak or a
  write that could land outside;
- every state file is 0600 and every state directory 0700 even under umask 000;
- secret values are masked in events, inspect, status, tail and result output
  (run.json itself keeps them in clear, as documented: its 0600 mode protects them).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import (
    cli,
    finished,
    isolate,
    make_fifo,
    read_fifo_line,
    run_token,
    write_recipe,
)
from tests.reliability._checks import (
    assert_clean,
    fast_cli,
    fast_cli_all,
    file_bytes,
    refused,
)
from tests.reliability._report import record

SUITE = "ownership and isolation"
ACCEPTS = {"mailbox": {"accepts": ["job.go"]}}


class Runs:
    """Live runs that wait on a FIFO barrier before idling, and their children's env."""

    def __init__(self, home: StateRoot, tmp_path: Path) -> None:
        self.home, self.tmp = home, tmp_path
        self.recipe = write_recipe(
            tmp_path,
            "idle",
            {**ACCEPTS, "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' idle {ready}"},
        )

    def start(self, run_id: str, session: str = "alice") -> dict[str, Any]:
        fifo = make_fifo(self.tmp / f"{run_id}.fifo")
        spawned = actors.spawn(
            str(self.recipe), as_=run_id, session=session, values={"ready": str(fifo)}
        )
        assert read_fifo_line(fifo) == "ready"
        return spawned

    def child(self, run_id: str) -> dict[str, str]:
        """The environment the runner gives every command of `run_id`."""
        token = run_token(self.home.run(run_id).dir)
        return {"ACTORS_RUN_ID": run_id, "ACTORS_RUN_TOKEN": token}

    def status(self, run_id: str) -> str:
        return str(actors.status(run_id)["status"])


@pytest.fixture
def runs(home: StateRoot, tmp_path: Path) -> Runs:
    return Runs(home, tmp_path)


# -- sessions ---------------------------------------------------------------------------------

CONTROL = [
    ["message", "run:{r}", "job.go", "x"],
    ["message", "run:{r}", "control.stop"],
    ["message", "run:{r}", "control.kill"],
    ["message", "room:{r}", "note.x", "hi"],
    ["message", "branch:{r}/b1", "job.go"],
    ["cancel", "{r}", "--grace", "0"],
    ["kill", "{r}"],
]


def _fill(commands: list[list[str]], run_id: str, *extra: str) -> list[list[str]]:
    return [[part.replace("{r}", run_id) for part in args] + list(extra) for args in commands]


def test_another_sessions_run_is_refused_without_force(
    home: StateRoot, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs.start("owned")
    before = file_bytes(home.run("owned").dir)
    attempts: list[tuple[list[str], dict[str, str] | None, str]] = []
    for args in _fill(CONTROL, "owned", "--session", "bob"):
        attempts.append((args, None, "not bob"))
    for args in _fill(CONTROL, "owned"):  # a plain shell: user:<login>
        attempts.append((args, None, "not user:"))
        attempts.append((args, {"ACTORS_SESSION": "mallory"}, "not mallory"))
    for args, env, needle in attempts:
        refused(args, fast_cli(*args, env=env), "belongs to alice", needle, "--force")
    refused(["kill"], cli("kill", "owned", "--session", "bob"), "belongs to alice")  # cold
    assert runs.status("owned") == "running"
    assert file_bytes(home.run("owned").dir) == before  # a refusal writes nothing
    mine = json.loads(fast_cli("ls", "--mine", "--json", "--session", "bob").stdout)
    assert mine == []

    # with --force the same principal may act
    ok = fast_cli("message", "run:owned", "job.go", "x", "--session", "bob", "--force")
    assert_clean(["message"], ok, allowed=(0,))
    assert "state=queued" in ok.stdout
    ok = fast_cli("kill", "owned", "--session", "bob", "--force", "--json")
    assert_clean(["kill"], ok, allowed=(0,))
    assert json.loads(ok.stdout)["status"] == "killed"

    # finished runs: archive and prune are the owner's too
    done = actors.spawn("hello", as_="done", session="alice")
    finished(done)
    for verb in ("archive", "prune"):
        refused([verb], fast_cli(verb, "done", "--session", "bob"), "belongs to alice")
    assert home.run("done").dir.is_dir()
    ok = fast_cli("archive", "done", "--session", "bob", "--force")
    assert_clean(["archive"], ok, allowed=(0,))
    assert not home.run("done").dir.exists() and (home.archive / "done").is_dir()
    record(
        SUITE,
        "another session's message / stop / cancel / kill / archive / prune",
        len(attempts) + 3,
        "refused (exit 2, nothing written) without --force; allowed with it",
    )


# -- sibling runs -----------------------------------------------------------------------------


def test_a_runs_child_cannot_act_on_a_sibling(home: StateRoot, runs: Runs) -> None:
    runs.start("a")
    runs.start("b")
    a_child, b_child = runs.child("a"), runs.child("b")
    before = file_bytes(home.run("b").dir)
    attempts: list[tuple[list[str], dict[str, str], tuple[str, ...]]] = []
    for args in _fill(CONTROL, "b"):
        attempts.append((args, a_child, ("belongs to alice, not run:a",)))
        attempts.append((args, {**a_child, "ACTORS_SESSION": "alice"}, ("not run:a",)))
        attempts.append(
            ([*args, "--session", "alice"], a_child, ("--session cannot be used inside a run",))
        )
    forged = [
        ({"ACTORS_RUN_ID": "b", "ACTORS_RUN_TOKEN": a_child["ACTORS_RUN_TOKEN"]}, "does not match"),
        ({"ACTORS_RUN_ID": "b", "ACTORS_RUN_TOKEN": ""}, "without a valid ACTORS_RUN_TOKEN"),
        ({"ACTORS_RUN_ID": "b"}, "without a valid ACTORS_RUN_TOKEN"),
        ({"ACTORS_RUN_ID": "../b", "ACTORS_RUN_TOKEN": "x"}, "without a valid"),
        ({"ACTORS_RUN_ID": "ghost", "ACTORS_RUN_TOKEN": "x"}, "names no run"),
        ({**a_child, "ACTORS_RUN_TOKEN": a_child["ACTORS_RUN_TOKEN"] + "x"}, "does not match"),
    ]
    for env, needle in forged:
        for args in (["kill", "b"], ["message", "run:b", "job.go"], ["recv", "--timeout", "0"]):
            attempts.append((args, env, (needle,)))
    attempts += [
        (["emit", "note.x", "--to", "session:bob"], a_child, ("its own session",)),
        (["emit", "note.x", "--to", "room:b"], a_child, ("its own room",)),
        (["emit", "note.x", "--to", "run:b"], a_child, ("emit sends to",)),
        (["recv", "--timeout", "0"], {**a_child, "ACTORS_BRANCH": "../x"}, ("ACTORS_BRANCH",)),
    ]
    for args, env, needles in attempts:
        refused(args, fast_cli(*args, env=env), *needles)
    assert runs.status("b") == "running"
    assert file_bytes(home.run("b").dir) == before

    # what a run may do: act on itself, and on the runs it spawned
    ok = fast_cli("message", "run:a", "job.go", "self", env=a_child)
    assert_clean(["message"], ok, allowed=(0,))
    spawned = fast_cli(
        "spawn", str(runs.recipe), "--as", "run:c", "-v", "ready=/dev/null", env=a_child
    )
    assert_clean(["spawn"], spawned, allowed=(0,))
    assert actors.status("c")["owner_id"] == "run:a"
    refused(["kill", "c"], fast_cli("kill", "c", env=b_child), "belongs to run:a, not run:b")
    assert_clean(["kill"], fast_cli("kill", "c", env=a_child), allowed=(0,))
    assert runs.status("c") == "killed"

    # and from a real command of a real run, with exactly the environment it is given
    inside = actors.spawn(
        template="sh -c 'actors kill b; echo rc=$?; actors message run:b job.go; echo rc=$?'",
        session="alice",
    )
    finished(inside)
    out = home.run(inside["run"]).stdout.read_text()
    assert out.splitlines() == ["rc=2", "rc=2"], out
    assert "belongs to alice, not run:" in home.run(inside["run"]).stderr.read_text()
    assert runs.status("b") == "running"
    record(
        SUITE,
        "a run's child against a sibling (kill, cancel, message, forged tokens, emit)",
        len(attempts) + 5,
        "refused without touching the sibling; own run and spawned runs allowed",
    )


# -- planted symlinks -------------------------------------------------------------------------

CANARY = "OUTSIDE-CANARY-7f3a"
RUN_FILES = (
    "events.jsonl",
    "outbox.jsonl",
    "result.json",
    "run.json",
    "progress.json",
    "communication.json",
    "stdout.log",
    "stderr.log",
    "token",
    "inbox.jsonl",
)


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    target = outside / "target.json"
    target.write_text(
        json.dumps({"id": CANARY, "status": "done", "output": CANARY, "run": "s"}) + "\n"
    )
    return target


def _readers_and_writers(run_id: str, child: dict[str, str]) -> list[tuple[list[str], Any]]:
    plain = [
        ["ls"],
        ["status", run_id],
        ["status", run_id, "--json"],
        ["result", run_id],
        ["tail", run_id],
        ["tail", run_id, "--stderr"],
        ["tail", run_id, "--events"],
        ["inspect", f"run:{run_id}"],
        ["inspect", f"run:{run_id}", "--view", "mailbox"],
        ["inspect", f"run:{run_id}", "--view", "messages"],
        ["inspect", f"run:{run_id}", "--view", "tail"],
        ["inspect", f"run:{run_id}", "--view", "communication"],
        ["message", f"run:{run_id}", "job.go", "x", "--force"],
    ]
    as_child = [
        ["recv", "--timeout", "0"],
        ["emit", "note.x", "y"],
    ]
    return [(args, None) for args in plain] + [(args, child) for args in as_child]


def _plant(home: StateRoot, name: str, target: Path) -> Path:
    planted = home.run("s").dir / name
    if planted.exists():
        planted.rename(planted.with_name(f"{name}.real"))
    planted.symlink_to(target)
    return planted


def _unplant(planted: Path) -> None:
    planted.unlink()
    real = planted.with_name(f"{planted.name}.real")
    if real.exists():
        real.rename(planted)


def test_a_symlinked_state_file_is_never_followed(
    home: StateRoot, runs: Runs, tmp_path: Path
) -> None:
    """Security property: nothing is read from or written to the link's target."""
    runs.start("s")
    child = runs.child("s")
    target = _outside(tmp_path)
    original = target.read_bytes()
    commands = _readers_and_writers("s", child)
    for name in RUN_FILES:  # inbox.jsonl last: a runner that cannot read its inbox stops
        planted = _plant(home, name, target)
        for args, env in commands:
            proc = fast_cli(*args, env=env)
            assert CANARY not in proc.stdout + proc.stderr, (name, args, proc.stdout, proc.stderr)
            assert "Traceback" not in proc.stderr
        assert target.read_bytes() == original, name
        assert planted.is_symlink()
        _unplant(planted)
        record(
            SUITE, f"symlink planted as {name}", len(commands), "not followed for reads or writes"
        )


def test_a_symlinked_journal_or_log_is_refused_in_one_line(
    home: StateRoot, runs: Runs, tmp_path: Path
) -> None:
    runs.start("s")
    target = _outside(tmp_path)
    for name in ("events.jsonl", "outbox.jsonl", "stdout.log"):
        planted = _plant(home, name, target)
        for args, env in _readers_and_writers("s", runs.child("s")):
            assert_clean(args, fast_cli(*args, env=env), allowed=(0, 2, 75))
        _unplant(planted)


def test_a_symlinked_run_or_session_directory_is_never_followed(
    home: StateRoot, tmp_path: Path
) -> None:
    """A run directory (or a session directory) that is a link to a look-alike outside."""
    finished(actors.spawn("hello", as_="real"))
    outside = tmp_path / "outside"
    fake_run = outside / "evil"
    fake_run.mkdir(parents=True)
    run_json = json.loads(home.run("real").run_json.read_text())
    (fake_run / "run.json").write_text(json.dumps({**run_json, "run": "evil"}))
    (fake_run / "result.json").write_text(json.dumps({"status": "done", "output": CANARY}))
    (home.runs / "evil").symlink_to(fake_run)
    fake_session = outside / "sess"
    fake_session.mkdir()
    real_inbox = next(home.sessions.iterdir()) / "inbox.jsonl"
    (fake_session / "inbox.jsonl").write_text(real_inbox.read_text().replace("hello", CANARY))
    (home.sessions / "victim").symlink_to(fake_session)
    before = file_bytes(outside)
    commands = [
        ["status", "evil"],
        ["result", "evil"],
        ["inspect", "run:evil"],
        ["tail", "evil"],
        ["message", "run:evil", "job.go", "--force"],
        ["kill", "evil", "--force"],
        ["archive", "evil", "--force"],
        ["prune", "evil", "--force"],
        ["inbox", "read", "--peek", "--session", "victim"],
        ["inbox", "read", "--session", "victim"],
        ["session", "show", "victim"],
        ["flush", "--session", "victim"],
    ]
    for args, proc in zip(commands, fast_cli_all(commands), strict=True):
        refused(args, proc, "is a symlink; refusing to follow it")
        assert CANARY not in proc.stdout + proc.stderr
    for args in (["ls", "--json"], ["session", "ls"], ["reconcile"], ["inspect", "session:all"]):
        proc = fast_cli(*args)
        assert_clean(args, proc, allowed=(0,))
        assert CANARY not in proc.stdout and "evil" not in proc.stdout
    assert file_bytes(outside) == before
    assert (home.runs / "evil").is_symlink() and (home.sessions / "victim").is_symlink()
    record(
        SUITE,
        "run directory and session directory planted as symlinks",
        len(commands) + 4,
        "refused in one line; link target never read or written",
    )


def test_a_symlinked_doorbell_directory_is_never_written_through(
    home: StateRoot, runs: Runs, tmp_path: Path
) -> None:
    runs.start("s", session="alice")
    outside = tmp_path / "bells"
    outside.mkdir()
    victim = outside / "x.fifo"
    victim.write_text("ORIGINAL")
    doorbells = home.run("s").dir / "doorbells"
    for entry in doorbells.iterdir():
        entry.unlink()
    doorbells.rmdir()
    doorbells.symlink_to(outside)
    fast_cli("message", "run:s", "job.go", "--session", "alice")
    assert victim.read_text() == "ORIGINAL"


# -- modes under a permissive umask -----------------------------------------------------------

MODE_SCENARIO = {
    "mailbox": {"accepts": ["job.go"], "emits": ["note.x"]},
    "template": [
        "sh -c 'actors recv --timeout 30 >/dev/null; "
        "actors emit note.x hi --deliver followup; actors emit note.y r --to room'",
        {"parallel": True, "template": [{"label": "b1", "template": "echo one"}]},
    ],
}


def _modes(root: Path) -> dict[str, str]:
    """Every path under root whose mode is not 0700 (dirs) / 0600 (files, FIFOs)."""
    wrong = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            wrong[str(path.relative_to(root.parent))] = oct(stat.S_IMODE(st.st_mode))
    return wrong


@pytest.fixture(scope="module")
def umask_000_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Everything a session does, through cold CLI processes started under umask 000 (the
    runner and its commands inherit it); run once for the tests of this section."""
    base = tmp_path_factory.mktemp("umask")
    root = base / "fresh" / "deeper" / "state"  # parents that do not exist yet
    recipe = write_recipe(base, "modes", MODE_SCENARIO)
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base, root)
        old = os.umask(0)
        try:
            steps = [
                ["session", "register", "--harness", "file", "--id", "ses"],
                ["spawn", str(recipe), "--as", "run:m", "--session", "ses"],
                ["message", "run:m", "job.go", "x", "--session", "ses"],
                ["message", "room:m", "note.z", "hi", "--session", "ses"],
                ["wait", "m"],
                ["ls"],
                ["reconcile"],
                ["inbox", "read", "--session", "ses"],
                ["spawn", "hello", "--as", "run:h", "--session", "ses", "--wait"],
                ["archive", "h", "--session", "ses"],
            ]
            for args in steps:
                assert_clean(args, cli(*args), allowed=(0,))
            finished({"run": "m", "pid": actors.status("m")["pid"]})
        finally:
            os.umask(old)
    return root


def test_state_is_private_under_umask_000(umask_000_root: Path) -> None:
    root = umask_000_root
    assert _modes(root) == {}
    for parent in (root.parent, root.parent.parent):
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700  # created by actors: private too
    count = sum(1 for _ in root.rglob("*"))
    record(
        SUITE,
        "file and directory modes under umask 000 (every path of a full session)",
        count,
        "dirs 0700, files and FIFOs 0600",
    )


# -- secrets ----------------------------------------------------------------------------------

SECRETS = {"api_token": "SEKRET-TOKEN-111", "password": "SEKRET-PW-222", "db_key": "SEKRET-KEY-333"}
MARKED = ("plain", "SEKRET-MARKED-444")  # an ordinary name, marked with --secret
VISIBLE = ("region", "VISIBLE-REGION-555")


def _secret_run(tmp_path: Path) -> list[str]:
    """A run that prints, emits and fails with every secret in its command line."""
    names = [*SECRETS, MARKED[0], VISIBLE[0]]
    script = 'echo "out: $*"; echo "err: $*" >&2; actors emit note.x "emitted: $1 $4"; exit 3'
    template = f"sh -c '{script}' sx " + " ".join(f"{{{n}}}" for n in names)
    args = ["spawn", "-t", template, "--as", "run:sx", "--secret", MARKED[0], "--wait"]
    for name, value in [*SECRETS.items(), MARKED, VISIBLE]:
        args += ["-v", f"{name}={value}"]
    proc = cli(*args)
    assert proc.returncode == 3, proc.stderr
    return [*SECRETS.values(), MARKED[1]]


def test_secrets_are_masked_in_events_inspect_status_tail_and_result(
    home: StateRoot, tmp_path: Path
) -> None:
    hidden = _secret_run(tmp_path)
    run_dir = home.run("sx").dir
    events = (run_dir / "events.jsonl").read_text()
    assert "***" in events and VISIBLE[1] in events  # masked selectively
    views = ["status", "tail", "messages", "artifacts", "files", "mailbox", "communication"]
    commands = [["inspect", "run:sx", "--view", v, "--json"] for v in views]
    commands += [["inspect", "run:sx", "--view", v] for v in views]
    commands += [
        ["status", "sx"],
        ["status", "sx", "--json"],
        ["ls", "--json"],
        ["tail", "sx"],
        ["tail", "sx", "--stderr"],
        ["tail", "sx", "--events"],
        ["result", "sx"],
        ["result", "sx", "--json"],
        ["inspect", "room:sx"],
    ]
    shown = ""
    for args, proc in zip(commands, fast_cli_all(commands), strict=True):
        assert_clean(args, proc, allowed=(0,))
        shown += proc.stdout
    leaked = [s for s in hidden if s in shown or s in events]
    assert leaked == []
    assert "***" in shown and VISIBLE[1] in shown
    # documented: run.json keeps the values in clear; its mode is what protects them
    run_json = run_dir / "run.json"
    assert all(s in run_json.read_text() for s in hidden)
    assert stat.S_IMODE(run_json.stat().st_mode) == 0o600
    inspect_status = json.loads(fast_cli("inspect", "run:sx", "--json").stdout)
    assert {k: inspect_status["values"][k] for k in [*SECRETS, MARKED[0]]} == dict.fromkeys(
        [*SECRETS, MARKED[0]], "***"
    )
    record(
        SUITE,
        "secret values (token/password/key names, --secret) in a failing run's output",
        len(commands) + 1,
        "masked in events, inspect, status, ls, tail, result; clear only in run.json (0600)",
    )


def test_session_options_named_like_secrets_are_masked(home: StateRoot) -> None:
    args = ["session", "register", "--harness", "opencode", "--id", "hooks", "--no-check"]
    args += ["-o", "url=http://127.0.0.1:9/shown", "-o", "session=ses_x"]
    args += ["-o", "password=SEKRET-OPT-1", "-o", "fallback=webhook", "-o", "secret=SEKRET-OPT-2"]
    assert_clean(args, cli(*args), allowed=(0,))
    shown = fast_cli("session", "show", "hooks").stdout
    assert "SEKRET-OPT" not in shown and "shown" in shown
    record(SUITE, "session adapter options named like secrets", 1, "masked in session show")


def test_secrets_never_reach_a_follow_up(home: StateRoot, tmp_path: Path) -> None:
    hidden = _secret_run(tmp_path)
    template = "sh -c 'actors emit note.x \"emitted: $1\" --deliver followup' x {api_token}"
    spawned = actors.spawn(template=template, values={"api_token": SECRETS["api_token"]})
    finished(spawned)
    inbox = fast_cli("inbox", "read", "--json").stdout
    assert [s for s in hidden if s in inbox] == []

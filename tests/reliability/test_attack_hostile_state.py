"""Promise 18 (issue 26, class 2 and part of 7): no reader is broken by what another
writes.

A run's own command writes damage over its own state files, as an attacker would: a value
nested 100,000 deep (`json.loads` raises RecursionError, not ValueError), one nested 600
deep (it parses, then breaks whatever walks it), a sparse file of 64 GiB, the right file
with the wrong types in it (a list where an object is, text where a number is, NaN,
Infinity, numbers of 4,000 digits, unpaired surrogate escapes), bytes that are not UTF-8,
a FIFO or a directory where a file is. Then every verb that reads runs reads them through
the real CLI (ls, status, status --line, result, tail, inspect, wait, message, metrics,
reconcile, kill, cancel, archive, prune), and a running dashboard serves its API. Each
must exit 0 or refuse in one `actors:` line naming the damage (exit 2), never with a
traceback, an internal error or a hang; a damaged run is listed as `(damaged: FILE)`, and
the runs beside it are listed, counted and served exactly as if it were not there.

The same for the other writers someone else controls: recipe files in a project's
recipe folder, `-v` values, hook stdin, dashboard request bodies; a hard link planted
where a journal lives (written through, like a symlink, before); a newline or an escape
sequence in a run's command or a recipe's file name (a forged `ls` row); and lease paths
that name the same tree (`/` and `/src/a.py`, `//lib` and `/lib`).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import actors
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import cli, isolate, make_fifo, read_fifo_line, wait_for_change, write_recipe
from tests.dashboard.conftest import Server, start_dashboard, stop_dashboard
from tests.reliability._attack import Canary
from tests.reliability._checks import assert_clean, describe, fast_cli, fast_cli_all
from tests.reliability._report import record

SUITE = "hostile state"
SESSION = "owner"
PY = sys.executable

# -- the attacker: a run's own command ---------------------------------------------------

DAMAGE = r'''
"""Damage FILES (comma list) of this run's state directory with SHAPE; say ready; sleep."""
import json, os, shutil, sys, time

files, shape, ready = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
state = os.environ["ACTORS_STATE_DIR"]
DEEP = b"[" * 100000 + b"]" * 100000  # RecursionError in json.loads
MID = b"[" * 600 + b"]" * 600  # parses, then breaks a recursive walk
BIG = 10 ** 4000


def swap(value):
    """A value of another type: text where a number or object is, a list where text is."""
    if isinstance(value, str):
        return [value]
    return "7"


def original(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def records(data, jsonl):
    found = []
    for line in data.splitlines() if jsonl else [data]:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found or [{"id": "H1", "event": "run.runner.start", "state": "queued",
                      "run": "x", "status": "done", "code": 0, "active": 1}]


def mapped(data, jsonl, fn, extra=b""):
    out = []
    for record in records(data, jsonl):
        text = json.dumps({k: fn(v) for k, v in record.items()}).encode()
        out.append(text[:-1] + (b", " + extra if extra else b"") + b"}")
    return b"\n".join(out) + (b"\n" if jsonl else b"")


def number(fn):
    return lambda v: fn(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def damage(path):
    jsonl = path.endswith(".jsonl")
    data = original(path)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    if shape == "fifo":
        return os.mkfifo(path, 0o600)
    if shape == "dir":
        return os.mkdir(path, 0o700)
    if shape == "huge":
        with open(path, "wb") as f:
            return f.truncate(64 << 30)  # sparse: no disk, and any whole read is fatal
    if shape == "deep":
        out = data + DEEP + b"\n" if jsonl else DEEP
    elif shape == "mid":
        out = mapped(data, jsonl, lambda v: v, b'"envelope": ' + MID + b', "x": ' + MID)
    elif shape == "types":
        out = (data + b"[1, 2]\n" if jsonl else b"[1, 2, 3]") + mapped(data, jsonl, swap)
    elif shape == "nan":
        out = mapped(data, jsonl, number(lambda v: float("nan")), b'"y": Infinity')
    elif shape == "giant":
        out = mapped(data, jsonl, number(lambda v: BIG), b'"pid": ' + str(BIG).encode()
                     + b', "z": 1e999')
    elif shape == "surrogate":
        out = mapped(data, jsonl, lambda v: "\ud800" if isinstance(v, str) else v)
    elif shape == "nonutf8":
        out = (data if jsonl else b"") + b"\xff\xfe\x80 \xc3\x28 \xed\xa0\x80\n"
    else:
        raise SystemExit(f"unknown shape {shape}")
    with open(path, "wb") as f:
        f.write(out)


for name in files:
    damage(os.path.join(state, name))
with open(ready, "w") as f:
    f.write("ready\n")
time.sleep(600)
'''

SHAPES = ("deep", "mid", "huge", "types", "nan", "giant", "surrogate", "nonutf8", "fifo", "dir")
GROUPS = {
    # run.json alone: every reader stops there
    "r": ("run.json",),
    # what status, result, tail and inspect read after run.json
    "o": ("result.json", "events.jsonl", "inbox.jsonl", "outbox.jsonl", "stdout.log"),
    # the rest a run writes about itself
    "p": ("progress.json", "token", "followup.json", "communication.json", "wake.jsonl"),
}
LISTED_DAMAGE = {"r": "run.json", "o": "result.json", "p": "progress.json"}
"""The file `ls` names for each group: the one the listing itself reads."""


def hostile_id(shape: str, group: str) -> str:
    return f"h-{shape}-{group}"


@dataclass
class World:
    root: StateRoot
    base: Path
    canary: Canary
    dashboard: Server
    good_done: str = "good-done"
    good_live: str = "good-live"
    sids: list[int] = field(default_factory=list)


def _spawn_hostile(base: Path, recipe: Path, shape: str, group: str) -> tuple[int, Path]:
    ready = make_fifo(base / f"{hostile_id(shape, group)}.ready")
    record_ = actors.spawn(
        str(recipe),
        as_=hostile_id(shape, group),
        session=SESSION,
        values={
            "py": PY,
            "script": str(base / "damage.py"),
            "files": ",".join(GROUPS[group]),
            "shape": shape,
            "ready": str(ready),
        },
    )
    return int(record_["pid"]), ready


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A live dashboard, a finished and a live run of SESSION, and one hostile run per
    damage shape and file group, each of which has damaged its own files."""
    from runtime.core.process import kill_session

    base = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base, base / "state")
        mp.setenv("ACTORS_SESSION", SESSION)
        mp.setenv("ACTORS_KILL_GRACE", "2")
        root = StateRoot(base / "state")
        assert cli("session", "register", "--harness", "file", "--id", SESSION).returncode == 0
        (base / "damage.py").write_text(DAMAGE)
        recipe = write_recipe(
            base,
            "hostile",
            {
                "mailbox": {"accepts": ["job.go"]},
                "template": "{py} {script} {files} {shape} {ready}",
            },
        )
        live_ready = make_fifo(base / "live.ready")
        live_recipe = write_recipe(
            base,
            "live",
            {"template": "sh -c 'echo ready > \"$1\"; exec sleep 600' live {ready}"},
        )
        world = World(root, base, Canary(base / "outside"), start_dashboard())
        try:
            done = actors.spawn("hello", as_=world.good_done, session=SESSION)
            live = actors.spawn(
                str(live_recipe),
                as_=world.good_live,
                session=SESSION,
                values={"ready": str(live_ready)},
            )
            world.sids.append(int(live["pid"]))
            assert actors.wait(done["run"], timeout=60)["status"] == "done"
            assert read_fifo_line(live_ready) == "ready"
            readies = []
            for shape in SHAPES:
                for group in GROUPS:
                    sid, ready = _spawn_hostile(base, recipe, shape, group)
                    world.sids.append(sid)
                    readies.append(ready)
            for ready in readies:  # every file is damaged, while the dashboard watches
                assert read_fifo_line(ready, timeout=60) == "ready"
            yield world
        finally:
            stopped = stop_dashboard(world.dashboard)
            for sid in world.sids:
                kill_session(sid)
        assert stopped.returncode == 0, f"the dashboard did not stop cleanly: {stopped.stderr}"
        assert "Traceback" not in stopped.stderr, stopped.stderr


# -- every reader, over every damage -------------------------------------------------------

PER_RUN = [
    ["status", "{r}"],
    ["status", "{r}", "--json"],
    ["result", "{r}"],
    ["tail", "{r}"],
    ["tail", "{r}", "--events"],
    ["inspect", "run:{r}"],
    ["inspect", "run:{r}", "--json"],
    ["inspect", "run:{r}", "--view", "mailbox"],
    ["inspect", "run:{r}", "--view", "messages"],
    ["inspect", "run:{r}", "--view", "files"],
    ["inspect", "run:{r}", "--view", "artifacts"],
    ["inspect", "run:{r}", "--view", "communication"],
    ["inspect", "room:{r}"],
    ["wait", "{r}", "--timeout", "0.1"],
    ["message", "run:{r}", "job.go", "hi"],
]
EVERYONE = [
    ["ls"],
    ["ls", "--json"],
    ["ls", "--tree"],
    ["ls", "--status", "damaged"],
    ["status", "--line", "--session", SESSION],
    ["metrics"],
    ["reconcile"],
    ["inspect", f"session:{SESSION}", "--view", "runs"],
    ["inspect", "session:all", "--view", "runs", "--json"],
    ["session", "show", SESSION],
    ["inbox", "read", "--peek", "--session", SESSION],
    ["status", "good-done", "--json"],
    ["status", "good-live", "--json"],
    ["wait", "good-done", "--timeout", "5"],
]


def _clean(args: list[str], proc: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, a `wait` verdict, or one `actors:` line (exit 2) naming what is wrong."""
    if args[0] == "wait" and proc.returncode in (1, 75, 137, 143):
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, describe(
            args, proc
        )
        return
    assert_clean(args, proc)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_reader_survives_a_run_that_damages_its_own_state(world: World, shape: str) -> None:
    runs = [hostile_id(shape, group) for group in GROUPS]
    commands = [list(args) for args in EVERYONE]
    for run in runs:
        commands += [[word.replace("{r}", run) for word in args] for args in PER_RUN]
    results = fast_cli_all(commands)
    for args, proc in zip(commands, results, strict=True):
        _clean(args, proc)
    out = {tuple(args): proc for args, proc in zip(commands, results, strict=True)}

    # the runs beside the damaged ones are listed, counted and waited on as ever
    listed = {r["run"]: r for r in json.loads(out[("ls", "--json")].stdout)}
    assert listed[world.good_done]["status"] == "done"
    assert listed[world.good_live]["status"] == "running"
    assert json.loads(out[("status", "good-done", "--json")].stdout)["status"] == "done"
    assert json.loads(out[("status", "good-live", "--json")].stdout)["status"] == "running"
    assert out[("wait", "good-done", "--timeout", "5")].returncode == 0
    line = out[("status", "--line", "--session", SESSION)].stdout.strip()
    assert line and set(line.split(" +")[0]) <= {"▷", "▶"}, line  # good-live counts
    rows = {row.split()[0]: row for row in out[("ls",)].stdout.splitlines()[1:] if row.strip()}
    assert world.good_done in rows and world.good_live in rows
    # ... and every damaged run is listed, as damaged when a file ls reads is, naming it
    for group, run in zip(GROUPS, runs, strict=True):
        assert run in listed and run in rows, run
        if listed[run].get("damaged"):
            assert listed[run]["damaged_file"] == LISTED_DAMAGE[group], listed[run]
            assert f"(damaged: {LISTED_DAMAGE[group]})" in rows[run], rows[run]
    if shape not in ("surrogate",):  # (an escape pair may still be one valid character)
        assert listed[hostile_id(shape, "r")]["status"] == "damaged"
        assert "(damaged: run.json)" in rows[hostile_id(shape, "r")]
    metrics = out[("metrics",)].stdout
    assert 'actors_runs{status="damaged"}' in metrics
    assert world.canary.untouched(), world.canary.diff()
    record(
        SUITE,
        f"a run writes {shape} over its own files",
        len(commands),
        "every reader exits 0 or refuses in one line; the others are listed as ever",
    )


def test_the_dashboard_keeps_serving_while_runs_damage_their_state(world: World) -> None:
    """The dashboard was watching while every hostile run damaged its files."""
    assert world.dashboard.proc.poll() is None, "the dashboard exited"
    token = {"X-Actors-Token": world.dashboard.token}

    def get(path: str) -> httpx.Response:
        return httpx.get(world.dashboard.base + path, headers=token, timeout=30)

    page = get("/api/runs?per=500")
    assert page.status_code == 200, page.text
    rows = {r["run"]: r for g in page.json()["groups"] for r in g["runs"]}
    assert rows[world.good_done]["status"] == "done"
    assert rows[world.good_live]["status"] == "running"
    for shape in SHAPES:
        assert hostile_id(shape, "r") in rows
        for group in GROUPS:
            answer = get(f"/api/runs/{hostile_id(shape, group)}")
            assert answer.status_code in (200, 404, 409), (shape, group, answer.text[:300])
            assert "error" in answer.json() or answer.status_code == 200
    for path in ("/api/sessions", "/metrics", f"/api/rooms/{hostile_id('deep', 'o')}"):
        assert get(path).status_code in (200, 404, 409), path
    assert get("/api/runs").status_code == 200  # and still serving
    assert world.dashboard.proc.poll() is None, "the dashboard exited"
    record(SUITE, "a dashboard watching runs damage their state", 4 + 3 * len(SHAPES), "serves")


async def test_the_mcp_server_answers_about_every_damaged_run(world: World) -> None:
    """`actors mcp` of the session that owns the hostile runs: its guardian scans them as
    it starts, and its tools read them."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=PY, args=["-m", "actors", "mcp", "--session", SESSION], env=dict(os.environ)
    )
    calls = 0
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        targets = [f"run:{hostile_id(shape, group)}" for shape in SHAPES for group in GROUPS]
        for target in [*targets, "session:all", f"room:{hostile_id('deep', 'o')}"]:
            for view in ("status", "messages") if target.startswith("run:") else ("status",):
                answer = await session.call_tool("inspect", {"target": target, "view": view})
                text = answer.content[0].text if answer.content else ""
                assert "Traceback" not in text and "internal error" not in text, (target, text)
                if answer.is_error:
                    assert "\n" not in text.strip(), (target, text)
                calls += 1
        listed = await session.call_tool("inspect", {"target": "session:all", "view": "runs"})
        assert not listed.is_error, listed.content[0].text
        assert world.good_live in listed.content[0].text
    assert actors.status(world.good_live)["status"] == "running"
    record(SUITE, "the MCP server's tools over damaged runs", calls + 1, "answered")


HOSTILE_BODIES: dict[str, bytes] = {
    "deep": b"[" * 100000 + b"]" * 100000,
    "deep object": b'{"to": "run:good-live", "type": "t", "body": '
    + b"[" * 500
    + b"]" * 500
    + b"}",
    "NaN": b'{"to": "run:good-live", "type": "t", "body": NaN}',
    "huge number": b'{"to": "run:good-live", "type": "t", "body": 1e999}',
    "surrogate": b'{"to": "run:good-live", "type": "t", "body": "\\ud800"}',
    "not UTF-8": b'{"to": "\xff\xfe", "type": "t"}',
    "not an object": b"[1, 2, 3]",
    "too large": b'{"body": "' + b"x" * (2 << 20) + b'"}',
}


def test_hostile_dashboard_request_bodies_get_an_answer(world: World) -> None:
    headers = {
        "X-Actors-Token": world.dashboard.token,
        "X-Actors-Dashboard": "1",
        "Content-Type": "application/json",
    }
    for name, body in HOSTILE_BODIES.items():
        for path in ("/api/message", f"/api/runs/{world.good_live}/kill"):
            answer = httpx.post(
                world.dashboard.base + path, content=body, headers=headers, timeout=30
            )
            assert answer.status_code in (400, 413), (name, path, answer.text[:300])
            assert answer.json()["error"], (name, path)
    assert world.dashboard.proc.poll() is None, "the dashboard exited"
    assert actors.status(world.good_live)["status"] == "running"  # nothing acted
    record(SUITE, "hostile dashboard request bodies", 2 * len(HOSTILE_BODIES), "400, nothing done")


@pytest.mark.parametrize("shape", SHAPES)
def test_stop_archive_and_prune_of_a_damaged_run_end_cleanly(world: World, shape: str) -> None:
    """Last (they end the runs): kill, cancel, archive and prune read the same files."""
    runs = [hostile_id(shape, group) for group in GROUPS]
    commands = [["cancel", run] for run in runs] + [["kill", run] for run in runs]
    results = fast_cli_all(commands[:3]) + fast_cli_all(commands[3:])
    for args, proc in zip(commands, results, strict=True):
        assert_clean(args, proc)
    after = [["archive", runs[1]], ["prune", runs[2]], ["ls"], ["status", "good-live", "--json"]]
    for args, proc in zip(after, fast_cli_all(after), strict=True):
        assert_clean(args, proc)
    assert actors.status(world.good_live)["status"] == "running"
    assert world.canary.untouched(), world.canary.diff()
    record(SUITE, f"cancel, kill, archive, prune of runs with {shape} files", 8, "clean")


def test_prune_older_than_goes_on_past_damaged_runs(world: World) -> None:
    proc = fast_cli("prune", "--older-than", "0s", "--json")
    assert_clean(["prune", "--older-than", "0s"], proc)
    assert actors.status(world.good_live)["status"] == "running"


# -- hard links ------------------------------------------------------------------------------


def test_a_hard_link_planted_where_a_journal_lives_is_never_written_through(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run replaces its inbox, events and outbox by hard links to a file outside the
    root (same file system, same owner: the kernel allows it); a message, an emit and a
    kill would append a JSON line to that file. Each is refused as damage instead."""
    from runtime.core.process import kill_session

    monkeypatch.setenv("ACTORS_SESSION", SESSION)
    canary = Canary(tmp_path / "outside")
    ready = make_fifo(tmp_path / "links.ready")
    names = ("inbox.jsonl", "events.jsonl", "outbox.jsonl", "wake.jsonl")
    script = "; ".join(
        f'rm -f "$ACTORS_STATE_DIR/{n}"; ln "$1" "$ACTORS_STATE_DIR/{n}"' for n in names
    )
    recipe = write_recipe(
        tmp_path,
        "links",
        {
            "mailbox": {"accepts": ["job.go"], "emits": ["note.x"]},
            "template": "sh -c '" + script + '; echo ready > "$2"; exec sleep 600\' x {c} {r}',
        },
    )
    spawned = actors.spawn(
        str(recipe), as_="links", session=SESSION, values={"c": str(canary.file), "r": str(ready)}
    )
    try:
        assert read_fifo_line(ready) == "ready"
        assert os.stat(canary.file).st_nlink == 1 + len(names)
        run_dir = home.runs / "links"
        from tests.conftest import run_token

        child = {"ACTORS_RUN_ID": "links", "ACTORS_RUN_TOKEN": run_token(run_dir)}
        tries = [
            (["message", "run:links", "job.go", "x"], None),
            (["emit", "note.x", "x", "--to", "room"], child),
            (["kill", "links"], None),
            (["status", "links"], None),
            (["tail", "links", "--events"], None),
        ]
        for args, env in tries:
            proc = cli(*args, env=env, timeout=60)
            assert_clean(args, proc)
            if proc.returncode == 2 and args[0] != "status":
                assert "hard link" in proc.stderr, describe(args, proc)
        assert canary.untouched(), canary.diff()
    finally:
        kill_session(int(spawned["pid"]))
    record(SUITE, "hard links planted at 4 journals", 5, "refused as damage; nothing written")


# -- forged rows ------------------------------------------------------------------------------

FORGED = "forged-run  done  1s  hello"


def _pty_run(*args: str) -> str:
    """The CLI's stdout as a terminal shows it (it runs on a pseudo-terminal)."""
    parent, child = pty.openpty()
    proc = subprocess.Popen(
        [PY, "-m", "actors", *args], stdout=child, stderr=subprocess.DEVNULL, close_fds=True
    )
    os.close(child)
    chunks = []
    try:
        while True:
            try:
                data = os.read(parent, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(parent)
        proc.wait(timeout=60)
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def test_a_newline_or_escape_in_a_field_cannot_forge_a_row(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe's file name and description, a run's command, a follow-up's summary and
    text: each shows as one escaped field of one row, on a pipe and on a terminal."""
    monkeypatch.setenv("ACTORS_SESSION", SESSION)
    recipes = tmp_path / ".actors" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / f"evil\n{FORGED}.json").write_text('{"template": "true"}')
    (recipes / "escape.json").write_text(
        json.dumps({"description": f"\x1b[2J\x1b]0;pwned\x07\n{FORGED}", "template": "true"})
    )
    word = f"a\n{FORGED}\x1b[31m"
    forger = actors.spawn(None, template=f"echo '{word}'", as_="forger", session=SESSION)
    sayer = write_recipe(
        tmp_path,
        "sayer",
        {
            "mailbox": {"emits": ["note.x"]},
            "template": 'sh -c \'actors emit note.x "$1" --summary "$1" --deliver followup\''
            " x {text}",
        },
    )
    said = actors.spawn(str(sayer), as_="sayer", session=SESSION, values={"text": word})
    for run in (forger, said):
        assert actors.wait(run["run"], timeout=60)["status"] == "done"
    commands = [
        ["ls"],
        ["ls", "--tree"],
        ["status", "forger"],
        ["recipes", "ls"],
        ["recipes", "check"],
        ["tools"],
        ["inbox", "read", "--peek", "--bodies", "--session", SESSION],
        ["inspect", "run:sayer", "--view", "messages"],
    ]
    plain = dict(zip(map(tuple, commands), fast_cli_all(commands), strict=True))
    for args, proc in plain.items():
        if args == ("recipes", "check"):  # exit 2: one recipe is invalid (its name)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, describe(args, proc)
        else:
            assert_clean(args, proc, allowed=(0,))
        for line in proc.stdout.splitlines():
            assert not line.lstrip("- ").startswith(FORGED.split()[0]), (args, proc.stdout)
        assert "\x1b" not in proc.stdout, (args, proc.stdout)
    assert len(plain[("ls",)].stdout.splitlines()) == 3  # the header and the two runs
    assert len(plain[("ls", "--tree")].stdout.splitlines()) == 2
    assert "\\x1b" in plain[("ls", "--tree")].stdout  # shown, escaped
    # follow-ups are fenced for an agent (runtime.delivery.render): every run-written line
    # sits behind the `| ` gutter, so none can start a row, and no control byte is raw
    fenced = plain[("inbox", "read", "--peek", "--bodies", "--session", SESSION)].stdout
    assert FORGED in fenced.replace("\n| ", "\n")  # shown, not dropped
    assert not [ln for ln in fenced.splitlines() if ln.startswith(FORGED.split()[0])], fenced
    assert "\x1b" not in fenced
    # on a terminal too (there actors' own colours are the only escapes)
    for args in (["ls"], ["recipes", "ls"]):
        shown = _pty_run(*args)
        assert not [ln for ln in shown.splitlines() if ln.startswith(FORGED.split()[0])], shown
    # --json stays exact
    listed = {r["run"]: r for r in json.loads(cli("ls", "--json").stdout)}
    assert word in listed["forger"]["command"]
    record(SUITE, "newlines and escapes in listed fields", len(commands) + 3, "escaped; one row")


# -- recipe folders, values, hook stdin --------------------------------------------------------


def _hostile_recipes(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {
        "deep": b"[" * 100000 + b"]" * 100000,
        "mid": b'{"template": "true", "x": ' + b"[" * 600 + b"]" * 600 + b"}",
        "nan": b'{"template": "true", "args": {"n": {"type": "number", "default": NaN}}}',
        "inf": b'{"template": "true", "x": 1e999}',
        "surrogate": b'{"template": "echo \\ud800"}',
        "nonutf8": b'{"template": "echo \xff\xfe"}',
        "list": b'[{"template": "true"}]',
        "types": b'{"template": 5, "mailbox": [1], "args": "x"}',
    }
    for name, data in files.items():
        (folder / f"{name}.json").write_bytes(data)
    with open(folder / "huge.json", "wb") as handle:
        handle.truncate(32 << 30)  # sparse
    os.mkfifo(folder / "fifo.json")
    (folder / "dir.json").mkdir()
    (folder / "zero.json").symlink_to("/dev/zero")
    return [*files, "huge", "fifo", "dir", "zero"]


def test_hostile_recipe_files_in_a_project_folder(home: StateRoot, tmp_path: Path) -> None:
    names = _hostile_recipes(tmp_path / ".actors" / "recipes")
    commands: list[list[str]] = [
        ["recipes", "ls"],
        ["recipes", "ls", "--json"],
        ["tools", "ls"],
        ["spawn", "hello"],
    ]
    folder = tmp_path / ".actors" / "recipes"
    for name in names:
        commands += [["recipes", "show", name], ["spawn", name], ["run", name]]
        commands.append(["tools", "register", f"t-{name}", "--from", str(folder / f"{name}.json")])
    results = fast_cli_all(commands)
    for args, proc in zip(commands, results, strict=True):
        assert_clean(args, proc)
    out = {tuple(a): p for a, p in zip(commands, results, strict=True)}
    listed = {e["name"]: e for e in json.loads(out[("recipes", "ls", "--json")].stdout)}
    for name in ("deep", "mid", "nan", "inf", "surrogate", "nonutf8", "list", "huge"):
        assert listed[name]["status"] == "invalid", listed[name]
    assert out[("spawn", "hello")].returncode == 0
    for name in ("deep", "mid", "nan", "huge", "fifo", "dir", "zero"):
        assert out[("spawn", name)].returncode == 2, describe(["spawn", name], out[("spawn", name)])
        register = ("tools", "register", f"t-{name}", "--from", str(folder / f"{name}.json"))
        assert out[register].returncode == 2, describe(register, out[register])
    assert {p.name for p in home.runs.iterdir()} == {
        out[("spawn", "hello")].stdout.strip().removeprefix("run:")
    }
    record(SUITE, "hostile files in a project's recipe folder", len(commands), "listed or refused")


HOSTILE_VALUES = {
    "deep": "[" * 100000 + "]" * 100000,
    "past the cap": "[" * 70 + "]" * 70,
    "NaN": "[NaN]",
    "Infinity": "[1e999]",
    "surrogate": '["\\ud800"]',
    "huge number": "[" + "9" * 5000 + "]",
}


def test_hostile_values_are_refused_before_anything_is_written(
    home: StateRoot, tmp_path: Path
) -> None:
    recipe = write_recipe(
        tmp_path, "arr", {"args": {"items": {"type": "array"}}, "template": "echo {items...}"}
    )
    commands = []
    for value in HOSTILE_VALUES.values():
        commands.append(["spawn", str(recipe), "-v", f"items={value}"])
        commands.append(["spawn", "-t", "echo {xs...}", "-v", f"xs={value}"])
    for args, proc in zip(commands, fast_cli_all(commands), strict=True):
        assert proc.returncode == 2, describe(args, proc)
        assert_clean(args, proc)
    assert not home.runs.exists() or not list(home.runs.iterdir())
    record(SUITE, "hostile -v values", len(commands), "refused in one line; nothing written")


HOOK_INPUTS: dict[str, bytes] = {
    "deep": b"[" * 100000 + b"]" * 100000,
    "deep object": b'{"session_id": "s", "x": ' + b"[" * 900 + b"]" * 900 + b"}",
    "NaN": b'{"session_id": NaN, "prompt": Infinity}',
    "not UTF-8": b'{"session_id": "\xff\xfe"}',
    "surrogate": b'{"session_id": "\\ud800", "cwd": "\\udfff"}',
    "wrong types": b'{"session_id": [1], "cwd": {"a": 1}, "prompt": 5, "hook_event_name": []}',
    "huge": b'{"x": "' + b"y" * (20 << 20) + b'"}',
}
HOOKS = [
    ["hook", "session-start"],
    ["hook", "file-changed"],
    ["hook", "user-prompt-submit"],
    ["hook", "pre-tool-use"],
    ["hook", "cursor-stop"],
    ["hook", "gemini-after-agent"],
    ["status", "--line", "--stdin"],
]


def test_hostile_hook_stdin_never_crashes_a_hook(home: StateRoot) -> None:
    for name, data in HOOK_INPUTS.items():
        for args in HOOKS:
            proc = subprocess.run(
                [PY, "-m", "actors", *args], input=data, capture_output=True, timeout=60
            )
            err = proc.stderr.decode(errors="replace")
            assert "Traceback" not in err and "internal error" not in err, (name, args, err)
            assert proc.returncode in (0, 2), (name, args, proc.returncode, err)
            if proc.returncode == 2 and args[1] != "file-changed":
                assert len(err.strip().splitlines()) == 1, (name, args, err)
    record(SUITE, "hostile hook stdin", len(HOOK_INPUTS) * len(HOOKS), "never a crash")


# -- lease paths ------------------------------------------------------------------------------


def _decisions(home: StateRoot, run: str) -> list[dict[str, Any]]:
    path = home.runs / run / "rooms"
    found = []
    for journal in path.rglob("*.jsonl") if path.exists() else []:
        found += [r for r in read_jsonl(journal).records if str(r.get("type")).startswith("lease.")]
    return found


def test_lease_paths_naming_the_same_tree_are_never_held_by_two(
    home: StateRoot, tmp_path: Path
) -> None:
    """One holder takes a path, another asks for the same tree spelled otherwise (denied),
    the first lets go; in turn for each spelling."""
    spawned = actors.spawn("leases", as_="leases")
    pairs = [("/", "/src/a.py"), ("//lib", "/lib"), ("/x/../y/", "/y"), ("src", "./src/a.py")]
    try:
        sent = 0
        for number, (first, second) in enumerate(pairs):
            for holder, kind, path in (
                (f"a{number}", "lease.acquire", first),
                (f"b{number}", "lease.acquire", second),
                (f"a{number}", "lease.release", first),
            ):
                args = ["message", "run:leases", kind, json.dumps({"paths": [path]}), "--body-json"]
                assert_clean(args, fast_cli(*args, "--session", holder, "--force"), allowed=(0,))
                sent += 1
                wait_for_change(
                    home.runs / "leases",
                    lambda n=sent: len(_decisions(home, "leases")) >= n,
                    what=f"{sent} lease decisions",
                )
        decisions = [d["type"] for d in _decisions(home, "leases")]
        assert decisions == ["lease.granted", "lease.denied", "lease.released"] * len(pairs)
    finally:
        actors.kill(spawned["run"])
    record(SUITE, "lease paths spelled differently", 3 * len(pairs), "the second holder denied")

"""Torn and corrupt state files: every reader recovers or reports damage, nothing is lost.

Each test damages real state the way a crash, a full disk or a stray editor would (a
truncated last line, garbage lines, records of the wrong shape; an empty, cut-off,
non-UTF-8 or wrongly typed JSON file) and then runs the real CLI over it: `ls`, `status`,
`inspect`, `result`, `inbox read`, `message`, `recv`, `emit`, `reconcile`, ... Every
command must exit 0 (it recovered) or 2 with one clear `actors: ...` line (it reports the
damage) — never a traceback or an internal error — and no command may delete or rewrite
the damaged bytes (the one exception is index.json, a documented rebuildable cache).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import (
    cli,
    finished,
    isolate,
    make_fifo,
    read_fifo_line,
    run_token,
    write_recipe,
)
from tests.reliability._checks import assert_clean, fast_cli, fast_cli_all, file_bytes, refused
from tests.reliability._report import record

SUITE = "corrupt files"
SESSION = "sess1"

# -- the damage ----------------------------------------------------------------------------


def _other_type(value: Any) -> Any:
    """A JSON value of a different type than `value` (for "right keys, wrong types")."""
    if isinstance(value, bool) or value is None:
        return [1]
    if isinstance(value, (int, float)):
        return "7"
    if isinstance(value, str):
        return 5
    if isinstance(value, list):
        return {"x": 1}
    return "text"


def _damage(original: bytes, kind: str) -> bytes:
    if kind == "empty":
        return b""
    if kind == "torn":  # a write cut short: the first half of the file
        return original[: len(original) // 2]
    if kind == "garbage":  # not UTF-8, not JSON
        return b"\xff\xfe\x00\x80 garbage \x9c\n"
    if kind == "not_object":
        return b"[1, 2, 3]\n"
    assert kind == "wrong_types"
    data = json.loads(original)
    return json.dumps({k: _other_type(v) for k, v in data.items()}).encode()


JSON_KINDS = ("empty", "torn", "garbage", "not_object", "wrong_types")

# -- a finished state root, built once and copied per test ----------------------------------

# One finished run per damaged run file, so one state root carries every damage at once.
RUN_OF = {
    "run.json": "r-run",
    "result.json": "r-result",
    "progress.json": "r-progress",
    "communication.json": "r-comm",
}
RUNS = (*RUN_OF.values(), "other")


@pytest.fixture(scope="module")
def template_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Finished `hello` runs of a registered session, with follow-ups and an index."""
    base = tmp_path_factory.mktemp("corrupt-template")
    root = base / "state"
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base, root)
        proc = cli("session", "register", "--harness", "file", "--id", SESSION)
        assert proc.returncode == 0, proc.stderr
        for spawned in [actors.spawn("hello", as_=run_id, session=SESSION) for run_id in RUNS]:
            finished(spawned)
        assert len(actors.runs()) == len(RUNS)  # writes index.json
    return root


@pytest.fixture
def done_root(home: StateRoot, template_root: Path) -> StateRoot:
    # (no FIFO is copied: opening a leftover doorbell to copy it would block)
    shutil.copytree(
        template_root, home.path, symlinks=True, ignore=shutil.ignore_patterns("*.fifo")
    )
    return home


JSON_FILES = {
    **{name: f"runs/{run}/{name}" for name, run in RUN_OF.items()},
    "index.json": "index.json",
    "session.json": f"sessions/{SESSION}/session.json",
}

READ_COMMANDS: list[list[str]] = [
    ["ls"],
    ["ls", "--json"],
    ["ls", "--tree"],
    ["inspect", "session:all", "--view", "runs"],
    ["status", "r-run"],
    ["status", "r-run", "--json"],
    ["inspect", "run:r-run"],
    ["result", "r-run"],
    ["message", "run:r-run", "job.go"],
    ["status", "r-result"],
    ["status", "r-result", "--json"],
    ["result", "r-result"],
    ["inspect", "run:r-result", "--view", "artifacts"],
    ["status", "r-progress"],
    ["status", "r-progress", "--json"],
    ["inspect", "run:r-progress"],
    ["status", "r-comm"],
    ["inspect", "run:r-comm", "--view", "communication"],
    ["session", "ls"],
    ["session", "show", SESSION],
    ["inbox", "read", "--peek", "--json", "--session", SESSION],
]


def _layout(square: int) -> dict[str, str]:
    """Test `square` damages file j with kind (square + j) % 5: five tests cover every
    (file, kind) pair, each with all six files damaged at once."""
    return {name: JSON_KINDS[(square + j) % 5] for j, name in enumerate(sorted(JSON_FILES))}


@pytest.mark.parametrize("square", range(len(JSON_KINDS)))
def test_damaged_json_files_are_reported_or_recovered_never_lost(
    done_root: StateRoot, square: int
) -> None:
    layout = _layout(square)
    damaged: dict[str, bytes] = {}
    for name, kind in layout.items():
        target = done_root.path / JSON_FILES[name]
        damaged[name] = _damage(target.read_bytes(), kind)
        target.write_bytes(damaged[name])
    before = file_bytes(done_root.path)

    results = dict(zip(map(tuple, READ_COMMANDS), fast_cli_all(READ_COMMANDS), strict=True))
    for args, proc in results.items():
        assert_clean(args, proc)
    assert_clean(["reconcile"], fast_cli("reconcile"), allowed=(0,))

    # a cold `python -m actors` process says exactly the same as the warm fork
    for args in (
        ("status", "r-run"),
        ("status", "r-result", "--json"),
        ("result", "r-result"),
        ("message", "run:r-run", "job.go"),
    ):
        real = cli(*args)
        assert (real.returncode, real.stdout, real.stderr) == (
            results[args].returncode,
            results[args].stdout,
            results[args].stderr,
        )

    def out(*args: str) -> str:
        return results[args].stdout

    # the damage is reported by the readers that need the file ...
    refused(["status", "r-run"], results[("status", "r-run")], "r-run", "run.json")
    refused(["result", "r-run"], results[("result", "r-run")], "run.json")
    refused(["message"], results[("message", "run:r-run", "job.go")], "run.json")
    listing = {r["run"]: r for r in json.loads(out("ls", "--json"))}
    assert listing["r-run"]["status"] == "damaged" and "run.json" in listing["r-run"]["reason"]
    assert "damaged" in out("ls")
    refused(["result", "r-result"], results[("result", "r-result")], "result.json")
    assert "result.json" in json.loads(out("status", "r-result", "--json"))["damaged"]
    assert "damaged: " in out("status", "r-result")
    if layout["communication.json"] in ("empty", "torn", "garbage"):
        args = ("inspect", "run:r-comm", "--view", "communication")
        refused(args, results[args], "communication.json")
    assert "session.json" in json.loads(out("session", "show", SESSION))["damaged"]
    assert "(damaged: " in out("session", "ls")
    # ... while everything else recovers: healthy runs, advisory progress, the inbox
    for run_id in ("other", "r-progress", "r-comm"):
        assert listing[run_id]["status"] == "done", listing[run_id]
    assert json.loads(out("status", "r-progress", "--json"))["status"] == "done"
    follow_ups = json.loads(out("inbox", "read", "--peek", "--json", "--session", SESSION))
    assert sorted(e["body"]["run"] for e in follow_ups) == sorted(RUNS)

    # ... and nothing is deleted or rewritten (index.json is a cache: rebuilt, valid again)
    after = file_bytes(done_root.path)
    indexed = set(json.loads(after["index.json"])["runs"])
    assert indexed == set(RUNS) - {"r-run"}  # a damaged run is never cached
    for name, data in damaged.items():
        if name != "index.json":
            assert after[JSON_FILES[name]] == data, f"{name} was rewritten"
    for rel, data in before.items():
        if rel != "index.json":
            assert after.get(rel, b"").startswith(data), f"{rel} lost bytes"
    for name, kind in layout.items():
        record(
            SUITE,
            f"{name}: {kind.replace('_', ' ')}",
            len(READ_COMMANDS) + 1,
            "index rebuilt from runs/; no crash"
            if name == "index.json"
            else "reported as damaged; bytes kept"
            if name in ("run.json", "result.json", "session.json")
            else "recovered; bytes kept",
        )


def test_index_entries_of_the_wrong_shape_are_rebuilt(done_root: StateRoot) -> None:
    """Entries whose stamp still matches but whose cached fields are of the wrong type."""
    index_file = done_root.index_file
    data = json.loads(index_file.read_text())
    for entry in data["runs"].values():
        entry["terminal"] = "done"
        entry["created_at"] = 5
    index_file.write_text(json.dumps(data))
    commands = [["ls", "--json"], ["ls"], ["ls", "--tree"], ["inspect", "session:all"]]
    results = fast_cli_all(commands)
    for args, proc in zip(commands, results, strict=True):
        assert_clean(args, proc, allowed=(0,))
    statuses = {r["run"]: r["status"] for r in json.loads(results[0].stdout)}
    assert statuses == dict.fromkeys(RUNS, "done")
    record(SUITE, "index.json: entries of the wrong shape", len(commands), "ignored and rebuilt")


# -- journals of a live run -----------------------------------------------------------------

LIVE_RECIPE = {
    "mailbox": {"accepts": ["job.go"], "emits": ["note.x"]},
    "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' live {ready}",
}


class Live:
    """A running run owned by SESSION, with the files its journals live in."""

    def __init__(self, home: StateRoot, tmp_path: Path) -> None:
        recipe = write_recipe(tmp_path, "live", LIVE_RECIPE)
        fifo = make_fifo(tmp_path / "ready.fifo")
        self.record = actors.spawn(
            str(recipe), as_="live", session=SESSION, values={"ready": str(fifo)}
        )
        assert read_fifo_line(fifo) == "ready"  # the command runs: the runner is idle now
        self.home = home
        self.dir = Path(self.record["state_dir"])
        self.child = {
            "ACTORS_RUN_ID": "live",
            "ACTORS_RUN_TOKEN": run_token(self.dir),
        }
        self.session_dir = home.sessions / SESSION

    @property
    def journals(self) -> dict[str, Path]:
        return {
            "run inbox": self.dir / "inbox.jsonl",
            "events": self.dir / "events.jsonl",
            "outbox": self.dir / "outbox.jsonl",
            "session inbox": self.session_dir / "inbox.jsonl",
            "deliveries": self.session_dir / "deliveries.jsonl",
        }

    def ok(
        self, *args: str, child: bool = False, allowed: tuple[int, ...] = (0,), cold: bool = False
    ) -> str:
        """A CLI call (as the run's child with `child`; `cold`: a fresh interpreter)."""
        proc = (cli if cold else fast_cli)(*args, env=self.child if child else None)
        assert_clean(args, proc, allowed=allowed)
        return proc.stdout

    def prime(self) -> None:
        """One queued message in, one follow-up out: every journal has real records.
        (In-process, for speed: the CLI does the same through the same functions.)"""
        actors.message("run:live", "job.go", "before", session=SESSION)
        with pytest.MonkeyPatch.context() as mp:
            for key, value in self.child.items():
                mp.setenv(key, value)
            actors.emit("note.x", "before", delivery="followup")
        for path in self.journals.values():
            assert path.stat().st_size > 0, path

    def append(self, path: Path, data: bytes) -> bytes:
        with open(path, "ab") as handle:
            handle.write(data)
        return path.read_bytes()

    def recv_body(self, cold: bool = False) -> Any:
        out = self.ok("recv", "--json", "--timeout", "3", child=True, cold=cold)
        return json.loads(out)["body"]


@pytest.fixture
def live(home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    monkeypatch.setenv("ACTORS_SESSION", SESSION)  # the CLI calls below act as the owner
    run = Live(home, tmp_path)
    yield run
    if actors.status("live")["status"] == "running":
        actors.kill("live")


READERS = [
    ["ls"],
    ["ls", "--tree"],
    ["status", "live"],
    ["status", "live", "--json"],
    ["status", "--line", "--session", SESSION],
    ["inspect", "run:live"],
    ["inspect", "run:live", "--view", "mailbox"],
    ["inspect", "run:live", "--view", "messages"],
    ["inspect", "run:live", "--view", "files"],
    ["tail", "live", "--events"],
    ["inbox", "read", "--peek", "--session", SESSION],
    ["session", "show", SESSION],
    ["session", "ls"],
]

GARBAGE_LINES = b'\x00\xff\xfe garbage \x80\n[1, 2, 3]\n\n"a string"\n{not json}\n42\nnull\n'

WRONG_SHAPE: dict[str, bytes] = {
    "events": b'{"event": 5, "ts": 5, "id": 5}\n'
    b'{"event": "run.runner.start", "process_identity": "text"}\n'
    b'{"id": "E1", "event": ["x"], "run_instance_id": 5}\n',
    "outbox": b'{"id": 5, "type": 5, "body": {"a": [1]}, "from": 5, "summary": [1]}\n'
    b'{"id": "O1", "type": null, "delivery": 5, "ts": 5}\n',
    "session inbox": b'{"id": 5, "state": "unread", "envelope": {}}\n'
    b'{"id": "S1", "state": "unread", "envelope": "text"}\n'
    b'{"id": "S2", "state": "unread", "envelope": null}\n'
    b'{"id": "S3", "state": "read", "envelope": ["x"]}\n',
    "deliveries": b'{"id": 5, "state": "queued"}\n'
    b'{"id": "D1", "event": "created", "state": 5, "attempts": "x", "next_attempt_at": 5}\n',
}


def _exercise(live: Live) -> None:
    """Readers, then writers: a message in and out, a follow-up out and read, a stop."""
    results = fast_cli_all(READERS)
    for args, proc in zip(READERS, results, strict=True):
        assert_clean(args, proc, allowed=(0,))
    live.ok("message", "run:live", "job.go", "after", cold=True)
    assert [live.recv_body(cold=True), live.recv_body()] == ["before", "after"]
    live.ok("recv", "--timeout", "0", child=True, allowed=(75,))
    live.ok("emit", "note.x", "after", "--deliver", "followup", child=True)
    inbox = json.loads(live.ok("inbox", "read", "--json", "--session", SESSION))
    assert [(e["type"], e["body"]) for e in inbox] == [("note.x", "before"), ("note.x", "after")]
    live.ok("reconcile")
    live.ok("flush", "--session", SESSION)
    # the runner itself still reads its inbox: a control.stop through it ends the run
    live.ok("message", "run:live", "control.stop")
    assert actors.wait("live", timeout=30)["status"] == "cancelled"


def test_garbage_lines_in_every_journal_are_skipped(live: Live) -> None:
    live.prime()
    damaged = {name: live.append(path, GARBAGE_LINES) for name, path in live.journals.items()}
    _exercise(live)
    for name, path in live.journals.items():
        assert path.read_bytes().startswith(damaged[name]), f"{name} lost bytes"
    record(
        SUITE,
        "garbage lines (binary, non-object JSON, blank) in 5 journals",
        len(READERS) + 10,
        "skipped by every reader; messages and follow-ups still flow; bytes kept",
    )


def test_records_of_the_wrong_shape_are_skipped(live: Live) -> None:
    """Valid JSON objects with missing or wrongly typed fields (the run inbox: below)."""
    live.prime()
    damaged = {name: live.append(live.journals[name], lines) for name, lines in WRONG_SHAPE.items()}
    _exercise(live)
    for name, before in damaged.items():
        assert live.journals[name].read_bytes().startswith(before), f"{name} lost bytes"
    record(
        SUITE,
        "records of the wrong shape in events, outbox, session inbox, deliveries",
        len(READERS) + 10,
        "skipped by every reader; bytes kept",
    )


def test_wrong_shape_records_in_a_run_inbox_do_not_crash_the_runner_or_recv(live: Live) -> None:
    live.prime()
    live.append(
        live.journals["run inbox"],
        b'{"id": 5, "state": "queued"}\n'
        b'{"id": "W1", "state": "queued", "envelope": "text"}\n'
        b'{"id": "W2", "state": "queued", "envelope": null}\n'
        b'{"id": "W3", "state": "queued", "envelope": {"to": "run:live"}}\n',
    )
    _exercise(live)
    record(
        SUITE,
        "records of the wrong shape in a live run's inbox",
        len(READERS) + 10,
        "skipped by the runner, recv and inspect; the runner still obeys control.stop",
    )


def test_torn_last_lines_are_ignored_by_readers(live: Live) -> None:
    """A final line without its newline (a crash mid-append) is never parsed or removed."""
    live.prime()
    damaged = {
        name: live.append(path, b'{"id": "T1", "state": "queu')
        for name, path in live.journals.items()
    }
    results = fast_cli_all(READERS)
    for args, proc in zip(READERS, results, strict=True):
        assert_clean(args, proc, allowed=(0,))
    mailbox = json.loads(live.ok("inspect", "run:live", "--view", "mailbox", "--json"))
    assert [e["id"] for e in mailbox["entries"] if e["id"] == "T1"] == []
    peek = json.loads(live.ok("inbox", "read", "--peek", "--json", "--session", SESSION))
    assert [e["body"] for e in peek] == ["before"]
    actors.kill("live")
    for name, path in live.journals.items():
        assert path.read_bytes().startswith(damaged[name]), f"{name} lost bytes"
    record(SUITE, "torn last line in 5 journals", len(READERS) + 2, "ignored; bytes kept")


TORN_THEN_APPEND = ("run inbox", "session inbox", "outbox", "events", "deliveries")


@pytest.mark.parametrize("journal", TORN_THEN_APPEND)
def test_a_record_appended_after_a_torn_tail_is_not_lost(live: Live, journal: str) -> None:
    live.prime()
    live.append(live.journals[journal], b'{"id": "T1", "state": "queu')
    if journal == "run inbox":
        live.ok("message", "run:live", "job.go", "after")
        assert [live.recv_body(), live.recv_body()] == ["before", "after"]
    elif journal in ("session inbox", "deliveries", "outbox"):
        out = live.ok("emit", "note.x", "after", "--deliver", "followup", "--print", child=True)
        ident = dict(part.split("=", 1) for part in out.split())["id"]
        if journal == "session inbox":
            peek = json.loads(live.ok("inbox", "read", "--peek", "--json", "--session", SESSION))
            assert [e["body"] for e in peek] == ["before", "after"]
        elif journal == "outbox":
            view = json.loads(live.ok("inspect", "run:live", "--view", "messages", "--json"))
            assert ident in [m["id"] for m in view["messages"]]
        else:  # the `created` receipt names the follow-up's type
            shown = json.loads(live.ok("session", "show", SESSION))
            assert [d.get("type") for d in shown["deliveries"].values()] == ["note.x"] * 2
    else:
        actors.kill("live")
        events = [e.get("event") for e in read_jsonl(live.journals["events"]).records]
        assert "run.kill" in events  # the stop request, written before the signal
    record(
        SUITE,
        f"a record appended after a torn last line ({journal})",
        4,
        "the torn line is closed off; the new record is read",
    )


# -- progress.json of an active run ------------------------------------------------------


def test_damaged_progress_of_a_running_run(live: Live) -> None:
    """ls, --tree and the prompt line read an active run's progress.json on every call."""
    progress = live.dir / "progress.json"
    original = progress.read_bytes()
    commands = [
        ["ls"],
        ["ls", "--tree"],
        ["status", "live", "--json"],
        ["status", "--line", "--session", SESSION],
        ["inspect", f"session:{SESSION}", "--view", "runs"],
    ]
    for kind in JSON_KINDS:
        damaged = _damage(original, kind)
        progress.write_bytes(damaged)
        results = fast_cli_all(commands)
        for args, proc in zip(commands, results, strict=True):
            assert_clean(args, proc, allowed=(0,))
        assert json.loads(results[2].stdout)["status"] == "running"
        assert results[3].stdout.strip() == "▶"  # one active unit, whatever progress says
        assert progress.read_bytes() == damaged
        record(SUITE, f"progress.json of a running run: {kind.replace('_', ' ')}", 5, "recovered")


def test_a_damaged_session_json_still_receives_follow_ups(done_root: StateRoot) -> None:
    """Delivery falls back to the durable inbox (file adapter) rather than losing it."""
    session_json = done_root.sessions / SESSION / "session.json"
    session_json.write_bytes(b'{"harness": 5, "options": "text", "id": [1]}')
    finished(actors.spawn("hello", as_="third", session=SESSION))
    inbox = json.loads(fast_cli("inbox", "read", "--json", "--session", SESSION).stdout)
    assert sorted(e["body"]["run"] for e in inbox) == sorted([*RUNS, "third"])
    assert session_json.read_bytes() == b'{"harness": 5, "options": "text", "id": [1]}'
    assert os.stat(session_json).st_size > 0
    record(SUITE, "session.json of the wrong shape, then a follow-up", 1, "delivered to inbox")

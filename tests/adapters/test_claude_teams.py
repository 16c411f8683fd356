"""The claude_teams adapter: Claude Code agent-team inbox files under Claude's own lock.

Claude's side is imitated by a Node script that uses the real `proper-lockfile` (the
package Claude Code bundles; installed with the peers in `.peers/node_modules`) with the
options and steps of Claude 2.1.197's `writeToMailbox` / `markMessagesAsRead`. Those tests
skip when Node or the peers are missing; the adapter-only tests always run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import adapters.claude_code.mailbox as ct
from adapters.claude_code.teams import ClaudeTeamsAdapter, msg_id_for
from runtime.delivery.contract import DeliveryContext, Receipt
from runtime.store.layout import StateRoot
from runtime.store.writes import write_bytes_atomic
from tests._levels import observed
from tests.conftest import PEERS, REPO, cli, wait_for_change

PROPER_LOCKFILE = PEERS / "node_modules" / "proper-lockfile"
NODE = shutil.which("node")  # .peers/node/bin's when `make peers` installed it (tests/conftest.py)
needs_node = pytest.mark.skipif(
    NODE is None or not PROPER_LOCKFILE.is_dir(),
    reason="node and .peers/node_modules/proper-lockfile (`make peers`) imitate Claude's writer",
)

WRITERS = 8
PER_WRITER = 12
CLAUDE_ENTRIES = 20

# Claude Code 2.1.197's mailbox functions, minus logging: writeToMailbox (`write`),
# markMessagesAsRead pruning what it took (`prune`), the older read:true flip (`flip`),
# and a holder that keeps the lock until told to go on (`hold`).
CLAUDE_JS = r"""
const fs = require("fs"), crypto = require("crypto"), readline = require("readline");
const lockfile = require(process.env.PROPER_LOCKFILE);
const OPTS = {retries: {retries: 10, minTimeout: 5, maxTimeout: 100}, onCompromised: (e) => { throw e; }};
const [mode, inbox, arg] = process.argv.slice(1);  // node -e SCRIPT -- ARGS
const lines = readline.createInterface({input: process.stdin});
const nextLine = () => new Promise((resolve) => lines.once("line", resolve));
let gaveUp = 0;
async function lock() {
  for (;;) {
    try { return await lockfile.lock(inbox, {lockfilePath: `${inbox}.lock`, ...OPTS}); }
    catch (e) { if (e.code !== "ELOCKED") throw e; gaveUp++; }  // Claude would drop its message here
  }
}
function read() {
  const raw = fs.readFileSync(inbox, "utf8");
  return raw.trim() === "" ? [] : JSON.parse(raw);  // Claude treats garbage as []: we fail loudly
}
function atomicWrite(entries) {
  const tmp = `${inbox}.tmp.${crypto.randomBytes(4).toString("hex")}`;
  fs.writeFileSync(tmp, JSON.stringify(entries, null, 2), {encoding: "utf8"});
  fs.renameSync(tmp, inbox);
}
async function writeToMailbox(message) {
  try { fs.writeFileSync(inbox, "[]", {encoding: "utf8", flag: "wx"}); }
  catch (e) { if (e.code !== "EEXIST") throw e; }
  const release = await lock();
  try {
    const entries = read();
    entries.push({...message, msgV: 1, msg_id: crypto.randomUUID(), type: "message", read: false});
    atomicWrite(entries);
  } finally { await release(); }
}
async function waitFor(msgId) {
  for (;;) {
    try { if (read().some((e) => e.msg_id === msgId)) return; } catch (e) {}
    await new Promise((r) => setTimeout(r, 10));
  }
}
(async () => {
  if (mode === "write") {
    await nextLine();
    for (let i = 0; i < Number(arg); i++)
      await writeToMailbox({from: "claude-writer", text: `claude ${i}`, summary: `claude ${i}`,
                            timestamp: new Date().toISOString()});
    console.log(JSON.stringify({gaveUp}));
  } else if (mode === "hold") {
    try { fs.writeFileSync(inbox, "[]", {encoding: "utf8", flag: "wx"}); } catch (e) {}
    const release = await lock();
    const entries = read();
    console.log("locked");
    await nextLine();
    entries.push({from: "holder", text: "held write", summary: "held", read: false,
                  timestamp: new Date().toISOString(), msgV: 1, msg_id: crypto.randomUUID(), type: "message"});
    atomicWrite(entries);
    await release();
    console.log("released");
  } else if (mode === "flip" || mode === "prune") {
    await waitFor(arg);
    const release = await lock();
    try {
      const entries = read();
      if (mode === "flip") { for (const e of entries) if (e.msg_id === arg) e.read = true; atomicWrite(entries); }
      else atomicWrite(entries.filter((e) => !e.read && e.msg_id !== arg));
    } finally { await release(); }
    console.log("done");
  }
  lines.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""

WRITER_PY = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from runtime.delivery.contract import DeliveryContext
from adapters.claude_code.teams import ClaudeTeamsAdapter
home, writer, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
adapter = ClaudeTeamsAdapter({"id": "w"}, {"team": "crew", "name": "team-lead", "home": home})
sys.stdin.readline()  # the start line: every writer starts together
statuses = {}
for i in [*range(count), "shared"]:
    ident = f"{writer}-{i}" if i != "shared" else "shared-delivery"
    envelope = {"type": "run.done", "from": writer, "summary": f"{writer} entry {i}"}
    receipt = adapter.receive_message(envelope, DeliveryContext(delivery_id=ident))
    statuses[receipt.status] = statuses.get(receipt.status, 0) + 1
print(json.dumps(statuses))
"""


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    """A Claude config dir with one agent team, `crew` (as TeamCreate leaves it)."""
    root = tmp_path / "claude"
    (root / "teams" / "crew").mkdir(parents=True)
    (root / "teams" / "crew" / "config.json").write_text('{"name": "crew", "members": []}')
    return root


def inbox_of(home: Path, name: str = "team-lead") -> Path:
    return home / "teams" / "crew" / "inboxes" / f"{name}.json"


def adapter(home: Path, **options: str) -> ClaudeTeamsAdapter:
    return ClaudeTeamsAdapter(
        {"id": "s"}, {"team": "crew", "name": "team-lead", "home": str(home), **options}
    )


def envelope(summary: str = "Run r1 finished", **extra: Any) -> dict[str, Any]:
    return {"type": "run.done", "from": "run-r1", "summary": summary, "body": {"ok": 1}, **extra}


def entries(home: Path, name: str = "team-lead") -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(inbox_of(home, name).read_text())
    return loaded


def node(*args: str) -> subprocess.Popen[str]:
    assert NODE is not None
    return subprocess.Popen(
        [NODE, "-e", CLAUDE_JS, "--", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PROPER_LOCKFILE=str(PROPER_LOCKFILE)),
    )


# -- the entry and the file ------------------------------------------------------------


def test_entry_has_claudes_shape_and_private_modes(claude_home: Path) -> None:
    receipt = adapter(claude_home).receive_message(
        envelope(), DeliveryContext(delivery_id="d-1", body_file="/x/bodies/d-1.md")
    )
    assert receipt.status == "accepted"
    assert receipt.observed == ["queued", "triggered"]
    assert "confirm_timeout=0" in (receipt.reason or "")
    [entry] = entries(claude_home)
    assert set(entry) == {"from", "text", "summary", "timestamp", "msgV", "msg_id", "type", "read"}
    assert entry["from"] == "run-r1"
    assert entry["summary"] == "actors follow-up run.done from run-r1"  # ours, no run text
    assert entry["read"] is False and entry["type"] == "message" and entry["msgV"] == 1
    assert entry["msg_id"] == msg_id_for("d-1")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["timestamp"])
    assert entry["text"].startswith("[actors] follow-up run.done from run-r1 · delivery d-1")
    assert "\n| Run r1 finished\n" in entry["text"]  # run-written: fenced
    assert "delivery d-1" in entry["text"] and '"ok": 1' in entry["text"]
    inbox = inbox_of(claude_home)
    assert stat.S_IMODE(inbox.stat().st_mode) == 0o600
    assert stat.S_IMODE(inbox.parent.stat().st_mode) == 0o700
    assert not inbox.with_name("team-lead.json.lock").exists()  # released
    assert sorted(p.name for p in inbox.parent.iterdir()) == ["team-lead.json"]  # no temp left


def test_sender_defaults_to_actors_and_names_are_sanitised_like_claude(
    claude_home: Path,
) -> None:
    (claude_home / "teams" / "my-team").mkdir()
    a = ClaudeTeamsAdapter(
        {"id": "s"}, {"team": "my team", "name": "re.viewer", "home": str(claude_home)}
    )
    a.receive_message({"type": "note", "summary": "hi"}, DeliveryContext(delivery_id="d-2"))
    path = claude_home / "teams" / "my-team" / "inboxes" / "re-viewer.json"
    assert json.loads(path.read_text())[0]["from"] == "actors"


def test_same_delivery_id_twice_is_one_entry(claude_home: Path) -> None:
    first = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-3"))
    again = adapter(claude_home).receive_message(
        envelope(), DeliveryContext(delivery_id="d-3", attempt=2)
    )
    other = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-4"))
    assert first.metadata["appended"] is True
    assert again.metadata["appended"] is False
    assert other.metadata["appended"] is True
    assert [e["msg_id"] for e in entries(claude_home)] == [msg_id_for("d-3"), msg_id_for("d-4")]


def test_existing_entries_are_kept_and_a_damaged_inbox_is_not_overwritten(
    claude_home: Path,
) -> None:
    inbox = inbox_of(claude_home)
    inbox.parent.mkdir()
    inbox.write_text('[{"from": "team-lead", "text": "earlier", "read": true}]')
    adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-5"))
    assert [e["text"][:8] for e in entries(claude_home)] == ["earlier", "[actors]"]
    inbox.write_text("{half a json")
    receipt = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-6"))
    assert receipt.status == "failed" and receipt.retryable
    assert "not JSON" in (receipt.reason or "")
    assert inbox.read_text() == "{half a json"


def test_missing_team_fails_for_good(claude_home: Path) -> None:
    shutil.rmtree(claude_home / "teams" / "crew")
    receipt = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-7"))
    assert receipt.status == "failed" and not receipt.retryable
    assert "no agent team" in (receipt.reason or "")
    assert not (claude_home / "teams" / "crew").exists()  # no orphan inbox created


# -- the lock ----------------------------------------------------------------------------


def test_a_held_lock_times_out_without_writing(
    claude_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = inbox_of(claude_home)
    inbox.parent.mkdir()
    inbox.write_text("[]")
    inbox.with_name("team-lead.json.lock").mkdir()  # a live holder (fresh mtime)
    monkeypatch.setattr(ct, "LOCK_WAIT_S", 0.3)
    receipt = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-8"))
    assert receipt.status == "failed" and receipt.retryable
    assert "held by another writer" in (receipt.reason or "")
    assert inbox.read_text() == "[]"
    assert inbox.with_name("team-lead.json.lock").is_dir()  # not ours: left alone


def test_a_stale_lock_is_taken_over_like_proper_lockfile(claude_home: Path) -> None:
    inbox = inbox_of(claude_home)
    inbox.parent.mkdir()
    lock = inbox.with_name("team-lead.json.lock")
    lock.mkdir()
    old = time.time() - 60  # a holder that died a minute ago (stale = 10 s)
    os.utime(lock, (old, old))
    receipt = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-9"))
    assert receipt.status == "accepted"
    assert len(entries(claude_home)) == 1
    assert not lock.exists()


def test_a_lock_lost_before_the_write_writes_nothing(
    claude_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_read = ct.read_inbox

    def read_then_lose_lock(path: Path) -> list[Any] | None:
        got = real_read(path)
        lock = path.with_name(path.name + ".lock")
        if lock.exists():  # under the lock: someone presumed us dead and took it over
            os.rmdir(lock)
            os.mkdir(lock)
        return got

    monkeypatch.setattr(ct, "read_inbox", read_then_lose_lock)
    receipt = adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-10"))
    assert receipt.status == "failed" and receipt.retryable
    assert "nothing was written" in (receipt.reason or "")
    assert not inbox_of(claude_home).exists()
    assert inbox_of(claude_home).with_name("team-lead.json.lock").is_dir()  # theirs, kept


@needs_node
def test_adapter_waits_for_claudes_lock_holder(
    claude_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude holds the lock (read done, write pending); our write must come after its."""
    inbox = inbox_of(claude_home)
    inbox.parent.mkdir()
    holder = node("hold", str(inbox))
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "locked"
    contended = threading.Event()
    real_backoff = ct._backoff

    def backoff(delay: float) -> None:
        contended.set()
        real_backoff(delay)

    monkeypatch.setattr(ct, "_backoff", backoff)
    result: list[Receipt] = []
    worker = threading.Thread(
        target=lambda: result.append(
            adapter(claude_home).receive_message(envelope(), DeliveryContext(delivery_id="d-11"))
        )
    )
    worker.start()
    assert contended.wait(10), "the adapter never met the held lock"
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "released"
    worker.join(20)
    assert holder.communicate(timeout=10)[0] == ""
    assert holder.returncode == 0
    assert result[0].status == "accepted"
    assert [e["from"] for e in entries(claude_home)] == ["holder", "run-r1"]


# -- many writers ------------------------------------------------------------------------


def _start_writers(home: Path) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_PY, str(REPO), str(home), f"w{k}", str(PER_WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(WRITERS)
    ]


class Watcher:
    """Parses the inbox over and over while writers run: it must always be a whole JSON
    array (or not exist yet), and it never shrinks."""

    def __init__(self, inbox: Path) -> None:
        self.inbox, self.stop, self.reads, self.errors = inbox, threading.Event(), 0, []
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self) -> None:
        last = 0
        while not self.stop.wait(0.0005):  # re-read constantly, but leave writers a core
            try:
                raw = self.inbox.read_text()
            except FileNotFoundError:
                continue
            if raw == "":  # Claude's own first write: create empty, then write "[]"
                continue
            try:
                count = len(json.loads(raw))
            except ValueError as exc:
                self.errors.append(f"unparseable: {exc}")
                continue
            if count < last:
                self.errors.append(f"shrank from {last} to {count}")
            last = count
            self.reads += 1

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()


def _run_writers(home: Path, claude: subprocess.Popen[str] | None) -> dict[str, Any]:
    inbox = inbox_of(home)
    watcher = Watcher(inbox)
    writers = _start_writers(home)
    for proc in [*writers, *([claude] if claude else [])]:
        assert proc.stdin is not None
        proc.stdin.write("go\n")  # everyone starts at once
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120) for proc in writers]
    claude_out = claude.communicate(timeout=120) if claude else ("", "")
    watcher.finish()
    for proc, (out, err) in zip(writers, outputs, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out) == {"accepted": PER_WRITER + 1}
    if claude:
        assert claude.returncode == 0, claude_out[1]
    assert watcher.errors == []
    assert watcher.reads > 0
    return {"claude": json.loads(claude_out[0]) if claude else None, "reads": watcher.reads}


def _assert_nothing_lost(home: Path, claude_entries: int) -> None:
    found = entries(home)
    ours = [e for e in found if e["from"].startswith("w")]
    expected = {msg_id_for(f"w{k}-{i}") for k in range(WRITERS) for i in range(PER_WRITER)}
    expected.add(msg_id_for("shared-delivery"))
    assert {e["msg_id"] for e in ours} == expected
    assert len(ours) == len(expected)  # the shared id once, not WRITERS times
    theirs = sorted(e["text"] for e in found if e["from"] == "claude-writer")
    assert theirs == sorted(f"claude {i}" for i in range(claude_entries))
    assert len(found) == len(expected) + claude_entries
    assert stat.S_IMODE(inbox_of(home).stat().st_mode) in (0o600, 0o644, 0o664)
    leftovers = sorted(p.name for p in inbox_of(home).parent.iterdir())
    assert leftovers == ["team-lead.json"], leftovers  # no lock dir, no temp file


def test_eight_concurrent_writers_lose_nothing(claude_home: Path) -> None:
    _run_writers(claude_home, None)
    _assert_nothing_lost(claude_home, 0)
    assert stat.S_IMODE(inbox_of(claude_home).stat().st_mode) == 0o600


@needs_node
def test_eight_writers_and_claudes_own_writer_lose_nothing(claude_home: Path) -> None:
    inbox_of(claude_home).parent.mkdir()
    claude = node("write", str(inbox_of(claude_home)), str(CLAUDE_ENTRIES))
    stats = _run_writers(claude_home, claude)
    _assert_nothing_lost(claude_home, CLAUDE_ENTRIES)
    print(f"claude writer ran out of its 10 retries {stats['claude']['gaveUp']} time(s)")


# -- read confirmation -------------------------------------------------------------------


def _python_reader(home: Path, msg_id: str, how: str) -> threading.Thread:
    """Claude's reader in Python: waits for the entry, then flips or prunes it under the lock."""

    def run() -> None:
        inbox = inbox_of(home)

        def written() -> bool:
            try:
                return any(e.get("msg_id") == msg_id for e in ct.read_inbox(inbox) or [])
            except ct.InboxDamaged:
                return False

        wait_for_change(home, written, what=f"entry {msg_id} written")
        with ct.inbox_lock(inbox):
            found = ct.read_inbox(inbox) or []
            if how == "flip":
                for e in found:
                    if e.get("msg_id") == msg_id:
                        e["read"] = True
            else:
                found = [e for e in found if e.get("msg_id") != msg_id]
            write_bytes_atomic(inbox, json.dumps(found).encode())

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.fixture(params=["python", "node"])
def reader_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "node" and (NODE is None or not PROPER_LOCKFILE.is_dir()):
        pytest.skip("node and .peers/node_modules/proper-lockfile imitate Claude's reader")
    return str(request.param)


@pytest.mark.parametrize("how", ["flip", "prune"])
def test_delivered_when_the_recipient_reads_the_entry(
    claude_home: Path, reader_kind: str, how: str
) -> None:
    msg_id = msg_id_for("d-20")
    inbox_of(claude_home).parent.mkdir()
    if reader_kind == "node":
        proc = node(how, str(inbox_of(claude_home)), msg_id)
    else:
        thread = _python_reader(claude_home, msg_id, how)
    receipt = adapter(claude_home, confirm_timeout="30").receive_message(
        envelope(), DeliveryContext(delivery_id="d-20")
    )
    if reader_kind == "node":
        assert proc.communicate(timeout=30)[0].strip() == "done"
    else:
        thread.join(30)
    assert receipt.status == "delivered"
    assert receipt.metadata["body_injected"] is True
    if how == "flip":
        assert receipt.observed == ["queued", "triggered", "injected"]
        assert receipt.metadata["read_by"] == "read:true"
        assert entries(claude_home)[0]["read"] is True
    else:
        assert receipt.observed == ["queued", "triggered", "woke"]
        assert receipt.metadata["read_by"] == "removed"
        assert entries(claude_home) == []
    # a later attempt with the same id after a flip finds it read: still one entry
    if how == "flip":
        again = adapter(claude_home).receive_message(
            envelope(), DeliveryContext(delivery_id="d-20", attempt=2)
        )
        assert again.status == "delivered" and len(entries(claude_home)) == 1


def test_not_read_in_time_is_accepted_and_team_removal_is_not_delivery(
    claude_home: Path,
) -> None:
    receipt = adapter(claude_home, confirm_timeout="0.2").receive_message(
        envelope(), DeliveryContext(delivery_id="d-21")
    )
    assert receipt.status == "accepted"
    assert "not read within 0.2s" in (receipt.reason or "")

    lock = inbox_of(claude_home).with_name("team-lead.json.lock")

    def remove_team_once_written() -> None:  # as Claude does when the team's session ends
        wait_for_change(
            claude_home,
            lambda: (
                not lock.exists()
                and any(e["msg_id"] == msg_id_for("d-22") for e in _safe_entries(claude_home))
            ),
            what="entry d-22 written and unlocked",
        )
        shutil.rmtree(claude_home / "teams" / "crew")

    remover = threading.Thread(target=remove_team_once_written)
    remover.start()
    receipt = adapter(claude_home, confirm_timeout="30").receive_message(
        envelope(), DeliveryContext(delivery_id="d-22")
    )
    remover.join(30)
    assert receipt.status == "accepted"
    assert "team ended" in (receipt.reason or "")


def _safe_entries(home: Path) -> list[dict[str, Any]]:
    try:
        return entries(home)
    except (FileNotFoundError, ValueError):
        return []


# -- registration and the runner ---------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["name=team-lead"], "claude_teams needs -o team=TEAM"),
        (["team=crew"], "claude_teams needs -o name=NAME"),
        (["team=crew", "name=x", "confirm_timeout=soon"], "confirm_timeout must be a number"),
        (["team=crew", "name=x", "confirm_timeout=-1"], "confirm_timeout must be a number"),
        (["team=crew", "name=x", "home=rel/dir"], "home must be an absolute path"),
        (["team=nope", "name=x"], "no agent team 'nope'"),
    ],
)
def test_bad_options_exit_2(
    home: StateRoot, claude_home: Path, options: list[str], message: str
) -> None:
    args = [a for o in options for a in ("-o", o)]
    if not any(o.startswith("home=") for o in options):
        args += ["-o", f"home={claude_home}"]
    proc = cli("session", "register", "--harness", "claude_teams", "--id", "t1", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_register_records_claude_config_dir_and_runner_delivers(
    home: StateRoot, claude_home: Path
) -> None:
    proc = cli(
        "session",
        "register",
        "--harness",
        "claude_teams",
        "--id",
        "t2",
        "-o",
        "team=crew",
        "-o",
        "name=team-lead",
        env={"CLAUDE_CONFIG_DIR": str(claude_home)},
    )
    assert proc.returncode == 0, proc.stderr
    from runtime.delivery.engine import DeliveryRunner
    from runtime.delivery.sessions import load_session

    session = load_session(home, "t2")
    assert session["options"]["home"] == str(claude_home)
    assert session["capabilities"]["level"] == "D3"  # what is proven: see docs/adapters.md
    state = DeliveryRunner(home).submit("t2", envelope(), delivery_id="d-30")
    assert state["state"] == "accepted"
    DeliveryRunner(home).submit("t2", envelope(), delivery_id="d-30")  # deduplicated upstream
    assert [e["msg_id"] for e in entries(claude_home)] == [msg_id_for("d-30")]


def test_doctor_on_a_team_inbox_without_a_live_teammate(home: StateRoot, claude_home: Path) -> None:
    """No Claude process reads the team inbox here: the levels come from the written entry
    (D3) and the declaration; the level table states them as such."""
    register = cli("session", "register", "--harness", "claude_teams", "--id", "t3",
                   "-o", "team=crew", "-o", "name=team-lead", "-o", f"home={claude_home}")  # fmt: skip
    assert register.returncode == 0, register.stderr
    proc = cli("doctor", "delivery", "--session", "t3")
    assert proc.returncode == 0, proc.stderr
    verdicts = observed(proc.stdout, setup="no live teammate (file level only)")
    assert verdicts["D3"] == "pass" and verdicts["D4"] == "fail", proc.stdout
    token = proc.stdout.split("token=", 1)[1].split()[0]
    assert any(token in entry["text"] for entry in entries(claude_home))

"""installs.json (what `actors install` wrote, so uninstall takes out only that) is read
at an install's start and written at its end. Two installs at once each wrote back the
records they had read: the other's were lost, and its uninstall then restored nothing.
One install or uninstall at a time holds the state root's `.installs.lock` from the
configs' read to the records' write.

The first install is stopped at its first atomic write (`files.atomic.after_tmp`: a
config file's, after installs.json was read, on the old code too); a second install of
another harness runs meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import runtime.core.faults
from runtime.store.layout import StateRoot
from tests.reliability.test_session_record_lock import _finished, _start, race_a_paused_writer

assert not runtime.core.faults.ARMED  # the fault hook never pauses this process


def test_two_installs_at_once_keep_both_records(home: StateRoot, tmp_path: Path) -> None:
    user = tmp_path / "user"
    env = {"HOME": str(user), "XDG_CONFIG_HOME": str(user / ".config"),
           "CODEX_HOME": str(user / ".codex")}  # fmt: skip
    barrier = tmp_path / "barrier"
    paused = {"ACTORS_PAUSE_AT": "files.atomic.after_tmp", "ACTORS_PAUSE_FIFO": str(barrier)}
    race_a_paused_writer(
        (["install", "codex", "--user"], None, {**env, **paused}),
        (["install", "opencode", "--user"], None, env),
        barrier,
    )
    records = json.loads(home.installs.read_text())
    harnesses = sorted({r["harness"] for r in records.values()})
    assert harnesses == ["codex", "opencode"], records
    # so uninstall finds what each wrote and takes it out
    gone = _start(["uninstall", "opencode", "--user"], None, env)
    _finished(gone)
    config = user / ".config" / "opencode" / "opencode.json"
    assert not config.exists() or "actors" not in json.loads(config.read_text()).get("mcp", {})

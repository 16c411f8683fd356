"""Resource limits: a full disk under the state root.

The state root lives on a 256 KiB tmpfs mounted for the test (we run as root in CI); a
filler file takes every free page, and journals are padded so the next record lands where
the test wants it: on no free byte at all, across a page boundary (the first part of the
line fits, the rest does not), or exactly where the message fits but the advisory wake
line after it does not. Where no tmpfs can be mounted, ENOSPC is injected through the
fault hook instead (`ACTORS_FAIL_AT=files.write`, runtime/core/faults.py).

Each time the writer must fail with exit 2 and one line that says the disk is full, and
leave nothing half-written: no partial line in a journal, no temp file, no partial run
directory; a message is either absent with its sender failed, or present with its
sender told it succeeded. Once space is freed the same commands work again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import _reap_runs, cli, idle_run, run_token
from tests.reliability._checks import journals_parse
from tests.reliability._report import record

SUITE = "disk full"
PAGE = 4096


@pytest.fixture
def disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: StateRoot) -> Iterator[StateRoot]:
    """A state root on a 256 KiB tmpfs, or the test's own root when nothing can be
    mounted (the tests then inject ENOSPC)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    mounted = False
    if not os.environ.get("ACTORS_TEST_INJECT_ENOSPC"):  # set it to try the fallback here
        with contextlib.suppress(OSError):
            mounted = (
                subprocess.run(
                    ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mount)],
                    capture_output=True,
                    check=False,
                ).returncode
                == 0
            )
    if not mounted:
        yield home
        return
    root = StateRoot(mount / "state")
    monkeypatch.setenv("ACTORS_HOME", str(root.path))
    try:
        yield root
    finally:
        _reap_runs(root)  # nothing may keep the mount busy
        subprocess.run(["umount", str(mount)], check=True)


def _mounted(root: StateRoot) -> bool:
    return root.path.parent.name == "tiny"


def _fill(root: StateRoot) -> Path:
    """Take every free page of the file system with a filler file."""
    filler = root.path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * PAGE)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return filler
    finally:
        os.close(fd)


def _pad(path: Path, slack: int) -> None:
    """Append one valid record so that exactly `slack` bytes remain in the last page."""
    need = (PAGE - slack - path.stat().st_size % PAGE) % PAGE
    if need < 16:
        need += PAGE
    line = '{"pad":"' + "x" * (need - len('{"pad":""}\n')) + '"}\n'
    with open(path, "a") as handle:
        handle.write(line)
    assert path.stat().st_size % PAGE == (PAGE - slack) % PAGE


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != "filler" and not p.name.startswith("index.json")
    }


def _leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.tmp")] + [str(p) for p in (root / "tmp").glob("*")]


def _send(
    run: str, token: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli("message", f"run:{run}", "job.item", json.dumps({"token": token}), "--body-json", env=env)


def _queued(root: StateRoot, run: str, token: str) -> int:
    return sum(
        1
        for r in read_jsonl(root.run(run).inbox).records
        if r.get("state") == "queued" and (r.get("envelope") or {}).get("body") == {"token": token}
    )


def _assert_disk_full_error(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.parametrize("slack", [0, 100], ids=["no-byte-free", "line-crosses-the-last-page"])
def test_message_on_a_full_disk_is_refused_whole(
    disk: StateRoot, tmp_path: Path, slack: int
) -> None:
    run = str(idle_run(tmp_path)["run"])
    assert _send(run, "first").returncode == 0
    env = None
    if _mounted(disk):
        _pad(disk.run(run).inbox, slack)
        _fill(disk)
    else:
        env = {"ACTORS_FAIL_AT": "files.write"}
    before = _snapshot(disk.path)
    refused = _send(run, "refused", env)
    _assert_disk_full_error(refused)
    assert _snapshot(disk.path) == before  # not a byte changed: the partial line was cut
    assert _leftovers(disk.path) == []
    if _mounted(disk):
        (disk.path / "filler").unlink()
    assert _send(run, "after").returncode == 0
    assert [_queued(disk, run, t) for t in ("first", "refused", "after")] == [1, 0, 1]
    journals = journals_parse(disk.path)
    how = "256 KiB tmpfs filled" if _mounted(disk) else "ENOSPC injected"
    record(
        SUITE,
        f"`actors message` on a full disk ({how}; {slack} bytes free in the inbox's last page)",
        1,
        "exit 2, one line (No space left on device); state root byte-identical, no temp file; "
        f"works again once space is freed; {journals} journals parse",
    )


def test_message_that_fits_when_its_wake_line_does_not(disk: StateRoot, tmp_path: Path) -> None:
    """The envelope is durable; only the advisory wake.jsonl line has no room. The sender
    must report success (a retry after a reported failure would send it twice)."""
    if not _mounted(disk):
        pytest.skip("needs a mountable tmpfs to place the boundary between two files")
    run = str(idle_run(tmp_path)["run"])
    assert _send(run, "first").returncode == 0
    _pad(disk.run(run).inbox, 2048)
    _pad(disk.run(run).wake, 0)
    _fill(disk)
    sent = _send(run, "fits")
    assert sent.returncode == 0, sent.stderr
    assert _queued(disk, run, "fits") == 1
    assert _leftovers(disk.path) == []
    journals = journals_parse(disk.path)
    record(
        SUITE,
        "`actors message` whose envelope fits but whose advisory wake line does not",
        1,
        f"sender reports success, envelope queued once; {journals} journals parse",
    )


def test_spawn_on_a_full_disk_leaves_no_partial_run(disk: StateRoot, tmp_path: Path) -> None:
    env = None
    assert cli("spawn", "-t", "true").returncode == 0  # creates runs/, tmp/, the recipe cache
    if _mounted(disk):
        _fill(disk)
    else:
        env = {"ACTORS_FAIL_AT": "files.write"}
    runs_before = sorted(p.name for p in disk.runs.iterdir())
    refused = cli("spawn", "-t", "echo never", env=env)
    _assert_disk_full_error(refused)
    assert sorted(p.name for p in disk.runs.iterdir()) == runs_before
    assert _leftovers(disk.path) == []
    if _mounted(disk):
        (disk.path / "filler").unlink()
    assert cli("spawn", "-t", "true").returncode == 0
    record(
        SUITE,
        "`actors spawn` on a full disk",
        1,
        "exit 2, one line; no run directory, no staging directory, no temp file left; "
        "spawns again once space is freed",
    )


def test_emit_on_a_full_disk_is_refused_whole(disk: StateRoot, tmp_path: Path) -> None:
    run = idle_run(tmp_path)
    paths = disk.run(str(run["run"]))
    token = run_token(paths.dir)
    inside = {"ACTORS_RUN_ID": str(run["run"]), "ACTORS_RUN_TOKEN": token}
    assert cli("emit", "note.x", "one", env=inside).returncode == 0
    if _mounted(disk):
        _pad(paths.outbox, 50)
        _fill(disk)
    else:
        inside["ACTORS_FAIL_AT"] = "files.write"
    before = _snapshot(disk.path)
    refused = cli("emit", "note.x", "two " + "y" * 200, env=inside)
    _assert_disk_full_error(refused)
    assert _snapshot(disk.path) == before
    assert _leftovers(disk.path) == []
    record(
        SUITE,
        "`actors emit` on a full disk (record crossing the last free byte)",
        1,
        "exit 2, one line; outbox byte-identical, no temp file",
    )

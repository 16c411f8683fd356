"""File primitives: atomic writes, whole-line appends under contention, torn tails, fold."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.core.errors import StateDamaged
from runtime.store.appends import append_jsonl
from runtime.store.reads import fold, parse_jsonl, read_json, read_jsonl, tail_jsonl
from runtime.store.writes import ensure_dir, publish_json_once, write_json_atomic


def test_atomic_json_replaces_whole_file_with_private_mode(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    old = os.umask(0)
    try:
        write_json_atomic(target, {"a": 1})
        write_json_atomic(target, {"a": 2})
    finally:
        os.umask(old)
    assert read_json(target) == {"a": 2}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_publish_once_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    assert publish_json_once(target, {"status": "done"}) is True
    assert publish_json_once(target, {"status": "killed"}) is False
    assert read_json(target) == {"status": "done"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_reader_ignores_a_torn_last_line_until_it_is_complete(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    append_jsonl(journal, {"id": "1"})
    with open(journal, "ab") as handle:
        handle.write(b'{"id": "2", "half')
    chunk = read_jsonl(journal)
    assert [r["id"] for r in chunk.records] == ["1"]
    assert chunk.torn_tail is True
    with open(journal, "ab") as handle:
        handle.write(b'": true}\n')
    later = read_jsonl(journal, offset=chunk.next_offset)
    assert [r["id"] for r in later.records] == ["2"]


def test_garbage_lines_are_counted_not_fatal() -> None:
    chunk = parse_jsonl(b'{"id":"a"}\nnot json\n[1,2]\n{"id":"b"}\n')
    assert [r["id"] for r in chunk.records] == ["a", "b"]
    assert chunk.bad_lines == 2


@pytest.mark.parametrize(
    ("data", "ids", "bad"),
    [
        (b'{"id":"a"}\n{"id":"b"}\n', ["a", "b"], 0),  # the one-call path
        (b'{"id":"a"}\n\n{"id":"b"}\n', ["a", "b"], 0),  # a blank line is skipped
        (b'{"id":"a"},{"id":"x"}\n{"id":"b"}\n', ["b"], 1),  # two values on a line
        (b'{"id":"a"}\n{"id":"\xff"}\n{"id":"b"}\n', ["a", "b"], 1),  # not UTF-8
        (b'{"compaction":{"generation":2}}\n{"id":"a"}\n', ["a"], 0),
        (b'{"id":"a"}\n"text"\n', ["a"], 1),
    ],
)
def test_every_line_is_judged_alone(data: bytes, ids: list[str], bad: int) -> None:
    """Whole-buffer parsing is an optimisation: what it yields must equal what judging each
    line alone yields, for damaged journals too."""
    chunk = parse_jsonl(data)
    assert [r["id"] for r in chunk.records] == ids
    assert chunk.bad_lines == bad
    assert chunk.next_offset == len(data)


def test_fold_applies_state_changes_in_order() -> None:
    lines = [
        {"id": "m1", "state": "queued", "body": "x"},
        {"id": "m2", "state": "queued"},
        {"id": "m1", "state": "claimed", "by": "c1"},
        {"id": "m1", "state": "handled"},
        {"state": "orphan"},
    ]
    state = fold(lines)
    assert list(state) == ["m1", "m2"]
    assert state["m1"] == {"id": "m1", "state": "handled", "body": "x", "by": "c1"}


def test_corrupt_json_is_reported_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text("{oops")
    with pytest.raises(StateDamaged, match="not valid JSON"):
        read_json(target)
    assert target.read_text() == "{oops"


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text('{"x": 1}\n')
    link = tmp_path / "events.jsonl"
    link.symlink_to(secret)
    with pytest.raises(StateDamaged, match="symlink"):
        append_jsonl(link, {"id": "evil"})
    with pytest.raises(StateDamaged):
        read_json(link)
    assert secret.read_text() == '{"x": 1}\n'


def test_ensure_dir_makes_every_new_component_private(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        ensure_dir(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    for part in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE((tmp_path / part).stat().st_mode) == 0o700


_WRITER = """
import sys
from pathlib import Path
from runtime.store.appends import append_jsonl
path, writer, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(count):
    append_jsonl(path, {"w": writer, "i": i, "pad": "p" * 300}, fsync=i % 50 == 0)
"""


def test_concurrent_writers_never_tear_or_reorder_lines(tmp_path: Path) -> None:
    journal = tmp_path / "shared.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(journal), f"w{n}", "500"])
        for n in range(8)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    raw = journal.read_bytes().splitlines()
    assert len(raw) == 4000
    seen: dict[str, int] = {}
    for line in raw:
        record = json.loads(line)
        assert record["i"] == seen.get(record["w"], -1) + 1
        seen[record["w"]] = record["i"]
    assert seen == {f"w{n}": 499 for n in range(8)}


def test_tail_reads_only_the_end(tmp_path: Path) -> None:
    journal = tmp_path / "big.jsonl"
    for i in range(2000):
        append_jsonl(journal, {"id": str(i), "pad": "x" * 200})
    last = tail_jsonl(journal, 3, window=4096)
    assert [r["id"] for r in last] == ["1997", "1998", "1999"]


def test_create_private_is_0600_and_never_creates_through_a_link(tmp_path: Path) -> None:
    from runtime.store.writes import create_private

    old = os.umask(0)
    try:
        assert create_private(tmp_path / "wake") is True
        assert create_private(tmp_path / "wake") is False
        outside = tmp_path / "outside" / "target"
        (tmp_path / "dangling").symlink_to(outside)
        assert create_private(tmp_path / "dangling") is False
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "wake").stat().st_mode) == 0o600
    assert not outside.exists() and not outside.parent.exists()


def test_trusted_dir_takes_only_a_directory_of_yours_that_no_one_else_can_write(
    tmp_path: Path,
) -> None:
    from runtime.core.errors import Refused
    from runtime.store.trust import trusted_dir

    root = tmp_path / "root"
    trusted_dir(root, root=root)  # missing: we would create it 0700
    root.mkdir(mode=0o700)
    trusted_dir(root, root=root)
    os.chmod(root, 0o755)
    trusted_dir(root, root=root)  # readable by others is accepted, as ssh does
    for mode in (0o775, 0o757, 0o1777):
        os.chmod(root, mode)
        with pytest.raises(Refused, match=f"state root {root} is writable by others"):
            trusted_dir(root, root=root)
    os.chmod(root, 0o700)
    runs = root / "runs"
    runs.mkdir(mode=0o700)
    os.chown(runs, 65534, 65534)
    with pytest.raises(Refused, match=r"runs/ in state root .* is owned by uid 65534, not you"):
        trusted_dir(runs, root=root)
    link = root / "sessions"
    link.symlink_to(tmp_path)
    with pytest.raises(StateDamaged, match="symlink"):
        trusted_dir(link, root=root)

# -- nothing under a state root is followed through a link (issue 17 #3) ---------------------


def _rooted(tmp_path: Path) -> tuple[Path, Path]:
    """A state root reached through a linked parent (allowed: only what is under the root
    is never followed), and a directory outside it with one file."""
    from runtime.store.layout import StateRoot

    real = tmp_path / "real"
    (real / "state").mkdir(parents=True)
    (tmp_path / "via").symlink_to(real)
    root = tmp_path / "via" / "state"
    StateRoot(root)  # registers it
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.json").write_text('{"outside": true}\n')
    return root, outside


def test_a_linked_directory_under_the_root_is_never_followed(tmp_path: Path) -> None:
    from runtime.store import safe
    from runtime.store.appends import locked

    root, outside = _rooted(tmp_path)
    ensure_dir(root / "runs" / "r1")
    (root / "runs" / "r1" / "captures").symlink_to(outside)
    linked = root / "runs" / "r1" / "captures"
    before = sorted(p.name for p in outside.iterdir())
    for action in (
        lambda: write_json_atomic(linked / "x.json", {}),
        lambda: publish_json_once(linked / "x.json", {}),
        lambda: append_jsonl(linked / "x.jsonl", {"a": 1}),
        lambda: read_json(linked / "f.json"),
        lambda: read_jsonl(linked / "f.json"),
        lambda: ensure_dir(linked / "sub"),
        lambda: locked(linked / ".lock").__enter__(),
        lambda: safe.unlink(linked / "f.json"),
        lambda: safe.rmtree(linked / "f.json"),
        lambda: safe.rename(linked / "f.json", root / "stolen.json"),
    ):
        with pytest.raises(StateDamaged, match="captures is a symlink"):
            action()
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "f.json").read_text() == '{"outside": true}\n'


def test_a_link_at_the_final_name_is_replaced_or_refused_never_written_through(
    tmp_path: Path,
) -> None:
    from runtime.store import safe

    root, outside = _rooted(tmp_path)
    run = ensure_dir(root / "runs" / "r1")
    (run / "progress.json").symlink_to(outside / "f.json")
    write_json_atomic(run / "progress.json", {"phase": "x"})  # replaces the link itself
    assert not (run / "progress.json").is_symlink()
    (run / "result.json").symlink_to(outside / "f.json")
    assert publish_json_once(run / "result.json", {"status": "done"}) is False
    (run / "events.jsonl").symlink_to(outside / "f.json")
    with pytest.raises(StateDamaged):
        append_jsonl(run / "events.jsonl", {"a": 1})
    with pytest.raises(StateDamaged):
        read_json(run / "result.json")
    safe.rmtree(run)  # removes the links as names
    assert (outside / "f.json").read_text() == '{"outside": true}\n'
    assert not run.exists()

"""Issue 20, `/metrics`: the Prometheus text of a state root, checked against the files
of real runs (a done, a failed and a killed run, follow-ups delivered to a file session,
messages waiting in a live run's inbox), hostile names, an empty and a damaged root, and
the `actors metrics` command.

The text is read by a strict parser written here (the exposition format 0.0.4 is small):
it refuses what Prometheus would refuse, or would read differently (an unknown escape, a
sample before its `# TYPE`, a repeated series, a histogram whose buckets are not
cumulative or whose `+Inf` bucket is not its count), so a test passes only on text a
scraper reads as the numbers asserted.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

import actors
from actors.dashboard.metrics import FOLLOWUP_BUCKETS, SPAWN_BUCKETS, render_metrics
from runtime.core.ids import parse_iso
from runtime.store.layout import StateRoot
from runtime.store.reads import read_jsonl
from tests.conftest import cli, finished, idle_run, make_fifo, read_fifo_line, write_recipe

SESSION = "coord"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_KINDS = ("counter", "gauge", "histogram", "summary", "untyped")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _labels(text: str, at: int) -> tuple[dict[str, str], int]:
    """`{a="x",b="y"}` from `text[at]` (the `{`); the labels and the index after `}`."""
    labels: dict[str, str] = {}
    at += 1
    while text[at] != "}":
        name = _LABEL.match(text, at)
        assert name, f"bad label name at {text[at:]!r}"
        assert text[name.end() : name.end() + 2] == '="', f'no =" after {name.group()}'
        at, value = name.end() + 2, []
        while text[at] != '"':
            if text[at] == "\\":
                assert text[at + 1] in _ESCAPES, f"unknown escape \\{text[at + 1]} in {text!r}"
                value.append(_ESCAPES[text[at + 1]])
                at += 2
            else:
                assert text[at] != "\n", "a raw line feed inside a label value"
                value.append(text[at])
                at += 1
        assert name.group() not in labels, f"label {name.group()} twice"
        labels[name.group()] = "".join(value)
        at += 1
        if text[at] == ",":
            at += 1
    return labels, at + 1


def parse(text: str) -> Series:
    """Every sample of the text, by (name, labels); AssertionError on anything off."""
    assert text.endswith("\n"), "the text must end with a line feed"
    kinds: dict[str, str] = {}
    helped: set[str] = set()
    series: Series = {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helped and name not in kinds, f"HELP of {name} late or twice"
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert _NAME.fullmatch(name) and kind in _KINDS and name not in kinds, line
            kinds[name] = kind
            continue
        assert not line.startswith("#") and line, f"unexpected line {line!r}"
        name_match = _NAME.match(line)
        assert name_match, line
        name = name_match.group()
        labels, at = (
            _labels(line, name_match.end())
            if line[name_match.end()] == "{"
            else ({}, name_match.end())
        )
        assert line[at] == " ", f"no space before the value: {line!r}"
        value = float(line[at + 1 :])  # a timestamp would make this fail: none is written
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        declared = kinds.get(name) or (kinds.get(family) == "histogram" and "histogram")
        assert declared, f"sample {name} before its # TYPE"
        key = (name, frozenset(labels.items()))
        assert key not in series, f"series {key} twice"
        series[key] = value
    _check_histograms(series, kinds)
    return series


def _check_histograms(series: Series, kinds: dict[str, str]) -> None:
    for family in (name for name, kind in kinds.items() if kind == "histogram"):
        groups: dict[frozenset[tuple[str, str]], list[tuple[float, float]]] = {}
        for (name, labels), value in series.items():
            if name == f"{family}_bucket":
                rest = frozenset(item for item in labels if item[0] != "le")
                groups.setdefault(rest, []).append((float(dict(labels)["le"]), value))
        for rest, buckets in groups.items():
            buckets.sort()
            counts = [count for _, count in buckets]
            assert counts == sorted(counts), f"{family} buckets are not cumulative"
            assert buckets[-1][0] == math.inf, f"{family} has no +Inf bucket"
            assert buckets[-1][1] == series[(f"{family}_count", rest)]
            assert (f"{family}_sum", rest) in series


def value(series: Series, name: str, **labels: str) -> float:
    return series[(name, frozenset(labels.items()))]


def histogram(series: Series, name: str, **labels: str) -> dict[float, float]:
    """`le` -> cumulative count of one histogram series."""
    return {
        float(dict(key)["le"]): count
        for (metric, key), count in series.items()
        if metric == f"{name}_bucket" and set(labels.items()) <= set(key)
    }


def expected_buckets(samples: list[float], bounds: tuple[float, ...]) -> dict[float, float]:
    counts = {bound: float(sum(s <= bound for s in samples)) for bound in bounds}
    return {**counts, math.inf: float(len(samples))}


# -- the numbers match the runs ---------------------------------------------------------


def _register() -> None:
    out = cli("session", "register", "--harness", "file", "--id", SESSION)
    assert out.returncode == 0, out.stderr


def _spawn(template: str) -> dict[str, object]:
    return dict(actors.spawn(template=template, session=SESSION))


def _spawn_latencies(home: StateRoot) -> list[float]:
    """Read the way a person would: each run's created_at and its runner's start event."""
    out = []
    for run_dir in home.runs.iterdir():
        created = json.loads((run_dir / "run.json").read_text())["created_at"]
        for event in read_jsonl(run_dir / "events.jsonl").records:
            if event["event"] == "run.runner.start":
                out.append(parse_iso(event["ts"]) - parse_iso(created))
                break
    return out


def _followup_latencies(home: StateRoot) -> list[float]:
    """result.json's ended_at to the delivered receipt of `<instance>:terminal`."""
    journal = read_jsonl(home.sessions / SESSION / "deliveries.jsonl").records
    delivered = {r["id"]: r["ts"] for r in journal if r.get("state") == "delivered"}
    out = []
    for run_dir in home.runs.iterdir():
        result = json.loads((run_dir / "result.json").read_text())
        at = delivered.get(f"{result['run_instance_id']}:terminal")
        if at:
            out.append(parse_iso(at) - parse_iso(result["ended_at"]))
    return out


def test_counts_and_histograms_match_real_runs(home: StateRoot, tmp_path: Path) -> None:
    _register()
    ok, failing = _spawn("true"), _spawn("false")
    gate = make_fifo(tmp_path / "started.fifo")
    slow = _spawn(f"sh -c 'echo up > {gate}; exec sleep 300'")
    assert read_fifo_line(gate) == "up"  # its runner is ready: the kill follows its start
    actors.kill(str(slow["run"]), session=SESSION)
    for record in (ok, failing, slow):
        finished(record)
    for record in (ok, failing):
        assert home.run(str(record["run"])).followup.exists()

    series = parse(render_metrics(home))

    statuses = {"done": 1, "failed": 1, "killed": 1, "running": 0, "cancelled": 0}
    for status, count in statuses.items():
        assert value(series, "actors_runs", status=status) == count, status
    assert value(series, "actors_runs_by_recipe", recipe="(template)", status="killed") == 1
    spawn = _spawn_latencies(home)
    assert len(spawn) == 3
    assert histogram(series, "actors_spawn_latency_seconds") == expected_buckets(
        spawn, SPAWN_BUCKETS
    )
    assert value(series, "actors_spawn_latency_seconds_sum") == pytest.approx(sum(spawn))
    followup = _followup_latencies(home)
    assert len(followup) == 2  # done and failed follow up; a kill does not
    assert histogram(series, "actors_followup_latency_seconds", harness="file") == expected_buckets(
        followup, FOLLOWUP_BUCKETS
    )
    assert value(series, "actors_delivery_receipts_total", status="delivered", harness="file") == 2
    assert value(series, "actors_deliveries_pending") == 0
    assert value(series, "actors_inbox_backlog", kind="session") == 2  # unread, both

    assert cli("inbox", "read", "--session", SESSION).returncode == 0
    again = parse(render_metrics(home))
    assert value(again, "actors_inbox_backlog", kind="session") == 0
    assert value(again, "actors_delivery_receipts_total", status="delivered", harness="file") == 2


def test_unclaimed_messages_of_a_live_run_are_its_backlog(home: StateRoot, tmp_path: Path) -> None:
    record = idle_run(tmp_path)
    for number in range(3):
        actors.message(f"run:{record['run']}", "job.item", number)
    series = parse(render_metrics(home))
    assert value(series, "actors_runs", status="running") == 1
    assert value(series, "actors_inbox_backlog", kind="run") == 3
    assert value(series, "actors_inbox_backlog_max", kind="run") == 3
    assert value(series, "actors_inboxes", kind="run") == 1
    actors.kill(str(record["run"]))
    finished(record)
    series = parse(render_metrics(home))
    assert value(series, "actors_inbox_backlog", kind="run") == 0  # nobody will claim them


# -- hostile names, empty and damaged roots -----------------------------------------------

HOSTILE = 'we"ird\\name\nwith} {le="1"} 9\r\x07\x1b[31m'


def test_hostile_recipe_and_harness_names_stay_inside_their_label(
    home: StateRoot, tmp_path: Path
) -> None:
    recipe = write_recipe(tmp_path, HOSTILE, {"template": "true"})
    record = actors.spawn(str(recipe))
    finished(dict(record))
    journal = home.sessions / SESSION / "deliveries.jsonl"
    journal.parent.mkdir(parents=True, mode=0o700)
    line = {"ts": "2026-01-01T00:00:00.000Z", "id": "x", "event": "delivered"}
    line.update(harness=HOSTILE, status="delivered", state="delivered")
    # what a third-party adapter could be named; and a line no writer of actors writes (an
    # unpaired surrogate escape is not UTF-8 text): skipped as damaged, never raised
    foreign = {**line, "id": "y", "harness": HOSTILE + "\udcff"}
    journal.write_text(json.dumps(line) + "\n" + json.dumps(foreign) + "\n")

    text = render_metrics(home)
    series = parse(text)

    shown = HOSTILE.replace("\r", "\ufffd").replace("\x07", "\ufffd").replace("\x1b", "\ufffd")
    assert value(series, "actors_runs_by_recipe", recipe=shown, status="done") == 1
    receipts = "actors_delivery_receipts_total"
    assert value(series, receipts, status="delivered", harness=shown) == 1
    assert not any(c in text for c in "\r\x07\x1b")
    text.encode("utf-8")  # no lone surrogate reaches the wire


def test_an_empty_state_root_reads_as_zeros_and_is_not_created(tmp_path: Path) -> None:
    root = StateRoot(tmp_path / "never-used")
    series = parse(render_metrics(root))
    assert value(series, "actors_runs", status="done") == 0
    assert value(series, "actors_spawn_latency_seconds_count") == 0
    assert value(series, "actors_inbox_backlog", kind="session") == 0
    assert value(series, "actors_build_info", version=actors.__version__, python=_python()) == 1
    assert not root.path.exists()


def _python() -> str:
    import platform

    return platform.python_version()


def test_damaged_files_are_counted_or_skipped_never_raised(home: StateRoot) -> None:
    _register()
    good, bad = _spawn("true"), _spawn("true")
    finished(good)
    finished(bad)
    home.run(str(bad["run"])).run_json.write_text("{not json")
    with open(home.run(str(good["run"])).events, "ab") as events:
        events.write(b"\x00garbage {\n")
    with open(home.sessions / SESSION / "deliveries.jsonl", "ab") as journal:
        journal.write(b'[1, 2]\n{"id": 5}\nnot json at all\n')

    series = parse(render_metrics(home))

    assert value(series, "actors_runs", status="done") == 1
    assert value(series, "actors_runs", status="damaged") == 1
    assert value(series, "actors_spawn_latency_seconds_count") == 1  # the good run's
    assert value(series, "actors_delivery_receipts_total", status="delivered", harness="file") == 2


# -- the command ------------------------------------------------------------------------


def test_actors_metrics_prints_the_same_text(home: StateRoot) -> None:
    _register()
    finished(_spawn("false"))
    out = cli("metrics")
    assert out.returncode == 0, out.stderr
    printed, rendered = parse(out.stdout), parse(render_metrics(home))
    gather = ("actors_metrics_gather_seconds", frozenset())
    assert printed.pop(gather) >= 0 and rendered.pop(gather) >= 0
    assert printed == rendered
    assert value(printed, "actors_runs", status="failed") == 1


def test_actors_metrics_output_replaces_a_file_whole(home: StateRoot, tmp_path: Path) -> None:
    target = tmp_path / "collector" / "actors.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    os.chmod(target, 0o600)
    out = cli("metrics", "--output", str(target))
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    assert value(parse(target.read_text()), "actors_runs", status="done") == 0
    assert os.listdir(target.parent) == ["actors.prom"]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # the collector's user reads it


def test_actors_metrics_into_a_missing_directory_is_one_line_and_status_2(
    home: StateRoot, tmp_path: Path
) -> None:
    out = cli("metrics", "--output", str(tmp_path / "missing" / "actors.prom"))
    assert out.returncode == 2
    assert out.stderr.count("\n") <= 2 and "Traceback" not in out.stderr
    assert "missing" in out.stderr


# -- what a scrape keeps between scrapes --------------------------------------------------


def test_a_reused_run_id_is_read_afresh_not_from_the_cache(home: StateRoot) -> None:
    _register()
    first = actors.spawn(template="true", as_="again", session=SESSION)
    finished(dict(first))
    before = parse(render_metrics(home))
    cache = json.loads(home.metrics_cache.read_text())
    assert list(cache["runs"]) == ["again"]
    assert oct(home.metrics_cache.stat().st_mode & 0o777) == "0o600"
    assert cli("archive", "again", "--session", SESSION).returncode == 0
    second = actors.spawn(template="false", as_="again", session=SESSION)
    finished(dict(second))

    after = parse(render_metrics(home))

    assert value(after, "actors_runs", status="failed") == 1
    assert value(after, "actors_runs", status="done") == 0
    assert value(after, "actors_spawn_latency_seconds_count") == 1
    assert _spawn_latencies(home) == [
        pytest.approx(value(after, "actors_spawn_latency_seconds_sum"))
    ]
    instance = json.loads(home.metrics_cache.read_text())["runs"]["again"][1]
    assert instance == second["run_instance_id"] != first["run_instance_id"]
    assert value(before, "actors_followup_latency_seconds_count", harness="file") == 1
    assert value(after, "actors_followup_latency_seconds_count", harness="file") == 1


def test_a_damaged_cache_is_rebuilt(home: StateRoot) -> None:
    _register()
    finished(_spawn("true"))
    expected = parse(render_metrics(home))
    for damage in ('{"version": 1, "runs": {"x": 5}}', "[", '{"version": 1, "runs": []}'):
        home.metrics_cache.write_text(damage)
        got = parse(render_metrics(home))
        gather = ("actors_metrics_gather_seconds", frozenset())
        got.pop(gather), expected.pop(gather, None)
        assert got == expected, damage
        assert json.loads(home.metrics_cache.read_text())["version"] == 1


def test_a_forgotten_and_registered_again_session_is_read_from_its_new_journal(
    home: StateRoot,
) -> None:
    _register()
    finished(_spawn("true"))
    finished(_spawn("true"))
    assert value(parse(render_metrics(home)), "actors_inbox_backlog", kind="session") == 2
    assert cli("session", "forget", SESSION).returncode == 0
    _register()
    finished(_spawn("false"))

    series = parse(render_metrics(home))  # the same process: its fold must start over

    assert value(series, "actors_inbox_backlog", kind="session") == 1
    assert value(series, "actors_delivery_receipts_total", status="delivered", harness="file") == 1
    assert value(series, "actors_followup_latency_seconds_count", harness="file") == 1


def test_a_journal_rewritten_in_place_is_read_again(home: StateRoot) -> None:
    """A session journal made again with the same inode (as a deleted file's number is
    reused) is told apart by its first bytes, so no stale offset skips its lines."""
    _register()
    finished(_spawn("true"))
    assert value(parse(render_metrics(home)), "actors_deliveries_pending") == 0
    journal = home.sessions / SESSION / "deliveries.jsonl"
    inode = journal.stat().st_ino
    lines = [
        {
            "ts": f"2026-01-01T00:00:0{n}.000Z",
            "id": f"d{n}",
            "event": "created",
            "state": "queued",
        }
        for n in range(8)
    ]
    with open(journal, "w") as rewrite:  # truncated and written again: the same inode
        rewrite.write("".join(json.dumps(line) + "\n" for line in lines))
    assert journal.stat().st_ino == inode

    series = parse(render_metrics(home))

    assert value(series, "actors_deliveries_pending") == 8
    assert (
        "actors_delivery_receipts_total",
        frozenset({("status", "delivered"), ("harness", "file")}),
    ) not in series


def test_scrapes_from_several_threads_at_once_agree(home: StateRoot) -> None:
    """A server renders in worker threads; the shared session folds must not be torn."""
    import threading

    _register()
    for template in ("true", "false", "true"):
        finished(_spawn(template))
    texts: list[str] = []

    def scrape() -> None:
        texts.append(render_metrics(home))

    threads = [threading.Thread(target=scrape) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    gather = ("actors_metrics_gather_seconds", frozenset())
    seen = [parse(text) for text in texts]
    for series in seen:
        series.pop(gather)
    assert len(seen) == 6 and all(series == seen[0] for series in seen)
    assert value(seen[0], "actors_delivery_receipts_total", status="delivered", harness="file") == 3


def test_the_bench_state_root_builder_makes_runs_every_reader_counts(
    home: StateRoot, tmp_path: Path
) -> None:
    """bench/_fixtures.py (the 10,000-run benches' builder): cloned runs and their
    follow-ups are counted like real ones, and the index lists every one. (`home` only
    isolates the environment; the builder makes its own root.)"""
    from bench._fixtures import build_state_root
    from runtime.views.index import list_runs

    build_state_root(tmp_path / "big", 7)  # 3 real runs, 4 copies: done, failed, killed, ...
    root = StateRoot(tmp_path / "big")
    series = parse(render_metrics(root))

    assert len(list_runs(root)) == 7
    statuses = {"done": 3, "failed": 2, "killed": 2}
    for status, count in statuses.items():
        assert value(series, "actors_runs", status=status) == count
    assert value(series, "actors_spawn_latency_seconds_count") == 7
    assert value(series, "actors_followup_latency_seconds_count", harness="file") == 5
    assert value(series, "actors_delivery_receipts_total", status="delivered", harness="file") == 5
    assert value(series, "actors_inbox_backlog", kind="session") == 5

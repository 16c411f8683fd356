"""The run commands through the real CLI: output, exit codes, bad input, state effects."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, make_fifo, read_fifo_line, snapshot, write_recipe


def spawn_id(*args: str) -> str:
    proc = cli("spawn", *args)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("run:")
    return line[4:]


def spawn_finished(home: StateRoot, *args: str) -> str:
    """Spawn and wait until the runner has exited: `wait` returns at the result, but the
    runner still writes its follow-up record after that, which a snapshot would catch."""
    run_id = spawn_id(*args)
    record = json.loads(home.run(run_id).run_json.read_text())
    finished({"run": run_id, "pid": record["pid"]})
    return run_id


def test_spawn_returns_at_once_and_the_run_finishes(home: StateRoot) -> None:
    run_id = spawn_id("hello", "-v", "name=actors")
    assert run_id.startswith("hello-")
    waited = cli("wait", run_id)
    assert waited.returncode == 0
    assert waited.stdout.strip() == f"run:{run_id}  done"
    result = cli("result", run_id)
    assert "HELLO ACTORS" in result.stdout
    tail = cli("tail", run_id, "-n", "1")
    assert tail.stdout == "HELLO ACTORS\n"


def test_two_spawns_without_as_get_distinct_ids_and_separate_state(home: StateRoot) -> None:
    first = spawn_finished(home, "hello")
    before = snapshot(home.run(first).dir)
    second = spawn_finished(home, "hello")
    assert first != second
    assert snapshot(home.run(first).dir) == before
    assert home.run(second).dir.is_dir()


def test_shell_metacharacters_in_values_arrive_as_literal_arguments(
    home: StateRoot, tmp_path: Path
) -> None:
    hostile = ["; rm -rf x", "$(touch pwned)", 'it\'s "quoted"', "line1\nline2", "`id`", "*", ""]
    template = f"{sys.executable} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' {{a}} {{b}} {{c}} {{d}} {{e}} {{f}} {{g}}"
    values = dict(zip("abcdefg", hostile, strict=True))
    args = [arg for name, value in values.items() for arg in ("-v", f"{name}={value}")]
    (tmp_path / "x").mkdir()
    run_id = spawn_id("-t", template, *args)
    assert cli("wait", run_id).returncode == 0
    argv = json.loads(actors.result(run_id)["output"])
    assert argv == hostile
    assert (tmp_path / "x").is_dir()
    assert not (tmp_path / "pwned").exists()


def test_spawn_wait_exits_with_the_runs_code(home: StateRoot) -> None:
    proc = cli("spawn", "-t", "sh -c 'exit 6'", "--wait")
    assert proc.returncode == 6
    assert "failed (6)" in proc.stdout
    fanout = cli("spawn", "fanout", "--wait")
    assert fanout.returncode == 0
    assert "done (degraded)" in fanout.stdout


def _bad_recipe(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "broken.json").write_text('{"template": "echo hi",')
    write_recipe(tmp_path, "unknown-key", {"template": "echo", "tiemout": 5})
    write_recipe(tmp_path, "bad-timeout", {"template": [{"template": "echo", "timeout": "soon"}]})
    write_recipe(tmp_path, "not-object", [1, 2])  # type: ignore[arg-type]
    return {
        "broken": str(tmp_path / "broken.json"),
        "unknown": str(tmp_path / "unknown-key.json"),
        "timeout": str(tmp_path / "bad-timeout.json"),
        "list": str(tmp_path / "not-object.json"),
    }


BAD_SPAWNS = {
    "unknown recipe": (["no-such-recipe"], "no recipe named 'no-such-recipe'"),
    "malformed json": (["{broken}"], "is not valid JSON: line 1 column 24"),
    "unknown key": (["{unknown}"], "tiemout: unknown key"),
    "bad timeout": (["{timeout}"], "expected milliseconds"),
    "recipe not an object": (["{list}"], "a recipe is a JSON object"),
    "missing value": (["-t", "echo {who}"], "needs a value for {who}"),
    "invalid run id": (["hello", "--as", "run:../escape"], "invalid run id '../escape'"),
    "spaces in id": (["hello", "--as", "a b"], "invalid run id 'a b'"),
    "value without equals": (["hello", "-v", "name"], "-v 'name' is not KEY=VALUE"),
    "injected value": (["hello", "-v", "run_id=x"], "run_id is set by the runtime"),
    "unbalanced quotes": (["-t", "echo 'oops"], "cannot split template"),
    "both recipe and template": (["hello", "-t", "echo"], "not both or neither"),
    "neither": ([], "not both or neither"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPAWNS))
def test_bad_spawn_input_exits_2_and_changes_nothing(
    home: StateRoot, tmp_path: Path, case: str
) -> None:
    spawn_finished(home, "hello", "--as", "existing")  # the root exists and holds a run
    files = _bad_recipe(tmp_path)
    args, expected = BAD_SPAWNS[case]
    args = [a.format(**files) if a.startswith("{") and a.strip("{}") in files else a for a in args]
    before = snapshot(home.path)
    proc = cli("spawn", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert proc.stderr.startswith("actors: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert snapshot(home.path) == before


def test_run_id_in_use_is_refused_without_touching_the_old_run(home: StateRoot) -> None:
    spawn_finished(home, "hello", "--as", "run:same")
    before = snapshot(home.path)
    proc = cli("spawn", "hello", "--as", "run:same")
    assert proc.returncode == 2
    assert "run id same is already in use" in proc.stderr
    assert snapshot(home.path) == before


def test_state_is_private_even_under_a_permissive_umask(home: StateRoot) -> None:
    old = os.umask(0)
    try:
        record = actors.spawn("hello")
        actors.wait(record["run"], timeout=30)
    finally:
        os.umask(old)
    for path in [home.path, *home.path.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} has mode {oct(mode)}"


def test_ls_status_and_json_views(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    busy = spawn_id(
        "-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}", "--as", "busy"
    )
    assert read_fifo_line(fifo) == "ready"
    done = spawn_id("hello", "--as", "finished")
    cli("wait", done)
    listing = cli("ls")
    lines = listing.stdout.splitlines()
    assert lines[0].split() == [
        "RUN", "STATUS", "STARTED", "DURATION", "CODE", "RECIPE", "ACTIVE"
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["busy"][1] == "running" and rows["busy"][-1] == "1"
    assert rows["busy"][4] == "-"  # no exit code while it runs
    assert rows["finished"][1:2] == ["done"] and rows["finished"][4:6] == ["0", "hello"]
    only_running = json.loads(cli("ls", "--status", "running", "--json").stdout)
    assert [r["run"] for r in only_running] == [busy]
    status = json.loads(cli("status", f"run:{busy}", "--json").stdout)
    assert status["status"] == "running" and status["active"] == 1
    documented = [  # docs/cli.md, status: every key, for an active run too
        "run", "address", "state_dir", "recipe", "tool", "command", "owner_id", "parent",
        "created_at", "pid", "status", "code", "degraded", "ended_at", "reason", "process",
        "phase", "active", "completed", "failed", "branches",
    ]  # fmt: skip
    assert [k for k in documented if k not in status] == [], status
    waited = json.loads(cli("wait", busy, "--timeout", "0", "--json").stdout)
    assert waited["status"] == "running" and "reason" in waited, waited
    assert cli("status", busy).stdout.startswith(f"run:{busy}  running\n")
    still = cli("result", busy)
    assert still.returncode == 2 and "is still running" in still.stderr
    bad = cli("ls", "--status", "sleeping")
    assert bad.returncode == 2 and "unknown status 'sleeping'" in bad.stderr


def test_tail_follow_streams_until_the_run_ends(home: StateRoot) -> None:
    run_id = spawn_id("-t", "sh -c 'for i in 1 2 3; do echo line $i; sleep 0.1; done'")
    proc = cli("tail", run_id, "-f", "-n", "0")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-1] == "line 3"
    events = cli("tail", run_id, "--events")
    assert "run.done" in events.stdout


def test_archive_and_prune_only_touch_finished_runs(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    busy = spawn_id("-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}")
    assert read_fifo_line(fifo) == "ready"
    for verb in ("archive", "prune"):
        refused = cli(verb, busy)
        assert refused.returncode == 2 and "only finished runs" in refused.stderr
    art = tmp_path / "keep.txt"
    first = spawn_id("-t", "sh -c 'echo data > \"$1\"' w {p}", "-v", f"p={art}")
    second = spawn_id("hello")
    for run_id in (first, second):
        cli("wait", run_id)
    archived = cli("archive", second)
    assert archived.returncode == 0 and (home.archive / second).is_dir()
    assert not home.run(second).dir.exists()
    pruned = cli("prune", first)
    assert pruned.returncode == 0 and not home.run(first).dir.exists()
    assert (home.archive / second).is_dir()
    nothing = cli("prune")
    assert nothing.returncode == 2 and "say what to prune" in nothing.stderr


def test_prune_can_preserve_artifacts(home: StateRoot, tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path,
        "maker",
        {"artifacts": {"out": "{p}"}, "template": "sh -c 'echo data > \"$1\"' w {p}"},
    )
    run_id = spawn_id(str(recipe), "-v", f"p={tmp_path / 'made.txt'}")
    cli("wait", run_id)
    proc = cli("prune", run_id, "--preserve-artifacts", "--json")
    preserved = json.loads(proc.stdout)[0]["preserved"]["out"]
    assert Path(preserved).read_text() == "data\n"
    assert Path(preserved).is_relative_to(home.preserved)


def test_corrupt_index_falls_back_to_a_scan(home: StateRoot) -> None:
    run_id = spawn_id("hello")
    cli("wait", run_id)
    assert cli("ls").returncode == 0
    home.index_file.write_text("{not json")
    listing = json.loads(cli("ls", "--json").stdout)
    assert [r["run"] for r in listing] == [run_id]
    assert json.loads(home.index_file.read_text())["runs"][run_id]["terminal"]["status"] == "done"


def test_a_listed_run_reads_the_same_from_the_index_as_derived_live(home: StateRoot) -> None:
    """The first listing derives each run and writes the index; the next reads finished runs
    from it. Both must print the same record, reason and pid included."""
    from runtime.views.index import LISTED

    run_id = spawn_id("-t", "sleep 300")
    cli("kill", run_id)
    home.index_file.unlink(missing_ok=True)
    derived = json.loads(cli("ls", "--json").stdout)
    cached = json.loads(cli("ls", "--json").stdout)
    assert home.index_file.exists()
    assert derived == cached
    assert tuple(cached[0]) == LISTED
    assert cached[0]["reason"].startswith("killed by ")
    assert isinstance(cached[0]["pid"], int)


def test_temp_cleanup_removes_stale_entries_and_never_runs(home: StateRoot) -> None:
    run_id = spawn_id("hello")
    cli("wait", run_id)
    stale = home.tmp / "spawn-crashed"
    stale.mkdir(parents=True)
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    os.utime(home.run(run_id).dir, (old, old))
    spawn_id("hello")
    assert not stale.exists()
    assert home.run(run_id).dir.is_dir()


def test_help_lists_every_command_quickly(home: StateRoot) -> None:
    proc = cli("--help")
    for name in (
        "spawn",
        "ls",
        "status",
        "tail",
        "result",
        "wait",
        "cancel",
        "kill",
        "archive",
        "prune",
    ):
        assert f"  {name} " in proc.stdout


def test_a_new_run_reusing_a_pruned_id_is_not_mistaken_for_the_old(
    home: StateRoot, tmp_path: Path
) -> None:
    spawn_id("fanout", "--as", "again")
    cli("wait", "again")
    assert json.loads(cli("ls", "--json").stdout)[0]["status"] == "done"
    assert cli("prune", "again", "again").returncode == 0
    fifo = make_fifo(tmp_path / "ready.fifo")
    spawn_id(
        "-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}", "--as", "again"
    )
    assert read_fifo_line(fifo) == "ready"
    listed = json.loads(cli("ls", "--json").stdout)
    assert [(r["run"], r["status"]) for r in listed] == [("again", "running")]


def test_wait_timeout_has_its_own_exit_code(home: StateRoot, tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "ready.fifo")
    run_id = spawn_id("-t", "sh -c 'echo ready > \"$1\"; sleep 300' x {f}", "-v", f"f={fifo}")
    assert read_fifo_line(fifo) == "ready"
    proc = cli("wait", run_id, "--timeout", "0.2")
    assert proc.returncode == 75
    assert "still running" in proc.stderr


def test_following_events_across_compactions_prints_each_event_once(
    home: StateRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tail -f --events` keeps reading when the runner's appends compact events.jsonl
    under it (a 4 KiB cap here): it reads the new file from its start and skips events it
    has already printed."""
    import subprocess

    from runtime.store.reads import read_jsonl

    monkeypatch.setenv("ACTORS_JOURNAL_CAP_BYTES", "4096")  # the runner's cap
    gate = make_fifo(tmp_path / "gate")
    recipe = write_recipe(
        tmp_path,
        "ticks",
        {
            "template": [
                {"label": "gate", "template": "sh -c 'read line < \"$1\"' x {gate}"},
                {"label": "tick", "template": "true", "repeat": 120},
            ]
        },
    )
    run = actors.spawn(str(recipe), values={"gate": str(gate)})
    follower = subprocess.Popen(
        [sys.executable, "-m", "actors", "tail", str(run["run"]), "-f", "--events", "-n", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None
    first = follower.stdout.readline()  # the tail is printed: the follow loop has begun
    assert first.strip()
    with open(gate, "w") as opened:
        opened.write("go\n")
    out, _ = follower.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(set(lines)), [x for x in lines if lines.count(x) > 1][:3]
    assert any("run.done" in x for x in lines[-3:])  # followed to the end
    ticks = [x for x in lines if "command.done" in x and "label=tick-" in x]
    # the newest instance's end is there; older ones may have been compacted away
    # between two reads (this cap keeps about six events), but none is shown twice
    assert ticks and ticks[-1].endswith("label=tick-119")
    events = read_jsonl(home.run(str(run["run"])).events)
    assert events.compaction is not None and events.compaction["generation"] >= 2

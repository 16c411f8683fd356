"""README's "A short tour", walked for real: every command of its ```sh block is run, in
order, on a fresh state root with the shipped recipes, and what its comment promises is
checked.

STEPS maps each tour line to the check of its comment (and, where the line holds
placeholders, to how they are filled from the runs the tour made). A README line that is
neither a step nor in SKIPPED fails `test_every_tour_line_is_walked`, so the tour cannot
gain a command this test does not run. A step whose current behaviour contradicts the
README is marked xfail(strict) with the issue-18 point that fixes it: once fixed, the
xfail turns into a failure until the mark is removed.

The agents the tour names (`claude -p`, `codex exec`) are replaced by a local stand-in
script that edits and commits in its worktree, and OpenCode's server by a loopback HTTP
stand-in that answers the session routes; everything else runs as written.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.actors._tour import (
    SHIPPED,
    Result,
    Tour,
    ok,
    one_run_id,
    read_until,
    readme_tour,
    tour_lines,
    tour_world,
)
from tests.conftest import wait_for_change

# --- the checks, one per tour line: (tour, results of that line's commands) -------------


def spawn_hello(tour: Tour, results: list[Result]) -> None:
    """`a two-step sequence; prints run:hello-xxxxxx  done`"""
    (out,) = results
    ok(out)
    match = re.fullmatch(r"run:(hello-[0-9a-z]{6})  done\n", out.stdout)
    assert match, out.stdout
    tour.runs["hello"] = match.group(1)
    status = tour.status(match.group(1))
    assert (status["completed"], status["failed"]) == (2, 0), status


def spawn_fanout(tour: Tour, results: list[Result]) -> None:
    """`three parallel branches, one fails: done (degraded)`"""
    (out,) = results
    ok(out)
    match = re.fullmatch(r"run:(fanout-[0-9a-z]{6})  done \(degraded\)\n", out.stdout)
    assert match, out.stdout
    tour.runs["fanout"] = match.group(1)
    status = tour.status(match.group(1))
    assert (status["completed"], status["failed"], status["degraded"]) == (2, 1, True), status


def spawn_ticker(tour: Tour, results: list[Result]) -> None:
    """`long-running; returns at once`: the command is back while the run goes on."""
    (out,) = results
    ok(out)
    assert out.stdout == "run:tick\n", out.stdout
    assert tour.status("tick")["status"] in ("starting", "running")


def run_tail_follow(tour: Tour) -> list[Result]:
    proc = tour.popen("tail", "actors tail tick -f")
    seen = read_until(proc, b"tick 2\n")
    return [subprocess.CompletedProcess(proc.args, 0, seen.decode(), "")]


def tail_follow(tour: Tour, results: list[Result]) -> None:
    """`follow its output`: new lines keep arriving (the exit is checked at `cancel`)."""
    assert results[0].stdout.startswith("tick 1\n"), results[0].stdout
    assert tour.procs["tail"].poll() is None  # still following


def ls_table(tour: Tour, results: list[Result]) -> None:
    """`compact table: start, duration, exit code (a template run shows its command); --json for machines`:
    the template run's row is checked where the tour spawns it."""
    (out,) = results
    ok(out)
    head, *rows = out.stdout.splitlines()
    assert head.split() == ["RUN", "STATUS", "STARTED", "DURATION", "CODE", "RECIPE", "ACTIVE"]
    listed = {row.split()[0]: row for row in rows}
    assert set(listed) == {"tick", tour.runs["hello"], tour.runs["fanout"]}, rows
    assert "done (degraded)" in listed[tour.runs["fanout"]]
    hello = listed[tour.runs["hello"]].split()
    assert re.fullmatch(r"\d\d:\d\d:\d\d", hello[2]) and hello[3].endswith("s"), hello
    assert hello[4] == "0" and listed["tick"].split()[4] == "-", rows
    machine = tour.actors("ls", "--json")
    ok(machine)
    assert {s["run"] for s in json.loads(machine.stdout)} == set(listed)


def status_one(tour: Tour, results: list[Result]) -> None:
    """`one run; --json for machines`"""
    (out,) = results
    ok(out)
    assert re.match(r"run:tick  running\n", out.stdout), out.stdout
    assert tour.status("tick")["run"] == "tick"


def cancel_tick(tour: Tour, results: list[Result]) -> None:
    """`SIGTERM, grace period, SIGKILL: status cancelled`"""
    (out,) = results
    ok(out)
    assert out.stdout.startswith("run:tick  cancelled"), out.stdout
    assert (tour.status("tick")["status"], tour.status("tick")["code"]) == ("cancelled", 143)
    assert tour.procs["tail"].wait(timeout=30) == 0  # `tail -f` ends with the run


def run_kill(tour: Tour) -> list[Result]:
    """RUN: every tour run has ended by now, so a ticker is started for it."""
    started = tour.actors("spawn", "ticker", "--as", "run:victim")
    ok(started)
    tour.runs["victim"] = "victim"
    return [tour.run("actors kill RUN".replace("RUN", "victim"))]


def kill_run(tour: Tour, results: list[Result]) -> None:
    """`SIGKILL the whole process tree at once: killed`"""
    from runtime.core.process import session_members

    (out,) = results
    ok(out)
    assert out.stdout.startswith("run:victim  killed"), out.stdout
    status = tour.status("victim")
    assert (status["status"], status["code"]) == ("killed", 137), status
    sid = json.loads((tour.root / "runs/victim/run.json").read_text())["process_identity"]["sid"]
    assert session_members(int(sid)) == {}  # nothing of the tree is left


def run_result(tour: Tour) -> list[Result]:
    """RUN: the fanout run, which has a failure, an exit code and output."""
    return [tour.run(f"actors result {tour.runs['fanout']}")]


def result_fanout(tour: Tour, results: list[Result]) -> None:
    """`code, its own result line, failures, artifacts, output head`"""
    (out,) = results
    ok(out)
    text = out.stdout
    assert text.startswith(f"run:{tour.runs['fanout']}  done (degraded)"), text
    assert re.search(r"^\s+code\s+0$", text, re.M), text
    assert re.search(r'^\s+result\s+"\w+ checked \S+"$', text, re.M), text  # its last line
    assert "gamma" in text and "failed" in text, text  # the failed node
    assert "alpha checked" in text, text  # the output head


def run_wait_several(tour: Tour) -> list[Result]:
    """RUN RUN ...: the degraded fanout (exit 0) and the killed ticker (137)."""
    return [tour.run(f"actors wait {tour.runs['fanout']} victim")]


def wait_several(tour: Tour, results: list[Result]) -> None:
    """`block until all end; exit with the worst code`"""
    (out,) = results
    assert out.returncode == 137, (out.returncode, out.stderr)
    lines = out.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"run:{tour.runs['fanout']}  done (degraded)"), lines
    assert lines[1].startswith("run:victim  killed"), lines


def run_restart(tour: Tour) -> list[Result]:
    """RUN: the degraded fanout, finished."""
    return [tour.run(f"actors restart {tour.runs['fanout']}")]


def restart_fanout(tour: Tour, results: list[Result]) -> None:
    """`a finished run again: same recipe and values, new id RUN-2`"""
    (out,) = results
    ok(out)
    first = tour.runs["fanout"]
    assert out.stdout == f"run:{first}-2\n", out.stdout
    tour.runs["restarted"] = f"{first}-2"
    again = tour.actors("wait", f"{first}-2")
    assert again.returncode == 0 and "done (degraded)" in again.stdout, again
    record = json.loads((tour.root / "runs" / f"{first}-2" / "run.json").read_text())
    assert (record["recipe"], record["restart_of"]) == ("fanout", first)


def group_and_queue(tour: Tour, results: list[Result]) -> None:
    """`at most 2 at once; past that queued, FIFO, no daemon`"""
    made, first = results
    ok(made)
    ok(first)
    assert made.stdout == "group ci: parallel 2\n", made.stdout
    runs = [one_run_id(first, "ticker")]
    try:
        second = tour.actors("spawn", "ticker", "--group", "ci")
        ok(second)
        runs.append(one_run_id(second, "ticker"))
        # spawn's "queued" is a forecast from the slots held now: once both hold theirs
        # (a loaded machine may start their runners later than the next spawn)
        from runtime.runner.slots import holders
        from runtime.store.layout import StateRoot

        group = StateRoot(tour.root).group("ci")
        wait_for_change(group.dir, lambda: len(holders(group)) == 2, 30, "two slots held")
        more = tour.actors("spawn", "ticker", "--group", "ci")
        ok(more)
        runs.append(one_run_id(more, "ticker"))
        assert "queued: waits for a slot of group ci" in more.stderr, more.stderr
        wait_for_change(
            tour.root / "runs",
            lambda: [tour.status(r)["status"] for r in runs] == ["running", "running", "queued"],
            30,
        )
        ok(tour.actors("kill", runs[0]))
        wait_for_change(
            tour.root / "runs" / runs[2], lambda: tour.status(runs[2])["status"] == "running", 30
        )
    finally:
        for run in runs:
            tour.actors("kill", run)


def spawn_template(tour: Tour, results: list[Result]) -> None:
    """`an inline template instead of a recipe`: `sleep {secs=5}` with secs=2 runs `sleep 2`."""
    (out,) = results
    ok(out)
    run = one_run_id(out, "run")
    tour.runs["template"] = run
    journal = tour.root / "runs" / run / "events.jsonl"
    wait_for_change(journal.parent, lambda: "command.start" in journal.read_text())
    events = tour.actors("tail", run, "--events")
    ok(events)
    assert re.search(r"command\.start .*sleep 2", events.stdout), events.stdout
    listed = tour.actors("ls")
    ok(listed)
    (row,) = [x for x in listed.stdout.splitlines() if x.startswith(run)]
    assert "sleep {secs=5}" in row, row  # `ls`: a template run shows its template, not `-`


def run_archive_prune(tour: Tour) -> list[Result]:
    """RUN: the hello run is archived, the killed ticker pruned."""
    return [
        tour.run(f"actors archive {tour.runs['hello']}"),
        tour.run("actors prune victim"),
    ]


def archive_prune(tour: Tour, results: list[Result]) -> None:
    """`finished runs only`"""
    archived, pruned = results
    ok(archived)
    ok(pruned)
    assert archived.stdout.startswith(f"run:{tour.runs['hello']} archived to "), archived.stdout
    assert pruned.stdout == "run:victim pruned (killed)\n", pruned.stdout
    assert not (tour.root / "runs" / "victim").exists()
    ok(tour.actors("spawn", "ticker", "--as", "run:busy"))
    try:
        for verb in ("archive", "prune"):
            refused = tour.actors(verb, "busy")
            assert refused.returncode == 2, (verb, refused)
            assert refused.stderr.startswith("actors: ") and "Traceback" not in refused.stderr
    finally:
        ok(tour.actors("kill", "busy"))


def spawn_player(tour: Tour, results: list[Result]) -> None:
    """`a message-driven actor (recipes/player.json)`"""
    (out,) = results
    ok(out)
    assert out.stdout == "run:music\n"
    assert tour.status("music")["status"] in ("starting", "running")


def message_music(tour: Tour, results: list[Result]) -> None:
    """`a typed message; types the recipe does not accept are refused`"""
    (out,) = results
    ok(out)
    fields = dict(pair.split("=", 1) for pair in out.stdout.split())
    assert fields["to"] == "run:music" and fields["type"] == "player.next", fields
    assert fields["state"] in ("queued", "sent"), fields
    refused = tour.actors("message", "run:music", "player.rewind")
    assert refused.returncode == 2, refused
    assert "does not accept 'player.rewind'" in refused.stderr, refused.stderr


def run_inspect(tour: Tour) -> list[Result]:
    """Once the player has answered player.next (its second player.track)."""
    outbox = tour.root / "runs" / "music" / "outbox.jsonl"

    def answered() -> bool:
        return outbox.exists() and outbox.read_text().count('"player.track"') >= 2

    wait_for_change(outbox.parent, answered, what="the player's second player.track")
    return [tour.run("actors inspect run:music --view messages")]


def inspect_messages(tour: Tour, results: list[Result]) -> None:
    """`what it emitted so far (player.track ...)`"""
    (out,) = results
    ok(out)
    head, *records = out.stdout.splitlines()
    assert head == "target=run:music view=messages", head
    tracks = [r for r in records if "type=player.track" in r]
    assert len(tracks) == 2, records
    assert "track 2 of 3" in tracks[1], tracks


def run_inbox_read(tour: Tour) -> list[Result]:
    """After the inline-template run's runner has finished (its follow-up is written)."""
    tour.wait_runner_gone(tour.runs["template"])
    return [tour.run("actors inbox read")]


def inbox_read(tour: Tour, results: list[Result]) -> None:
    """`follow-ups of your finished runs, all unread ones at once`"""
    (out,) = results
    ok(out)
    match = re.match(r"(\d+) unread follow-up\(s\)\n", out.stdout)
    assert match and int(match.group(1)) >= 1, out.stdout
    headers = re.findall(r"^\[actors\] follow-up (\S+) from run:(\S+) · delivery", out.stdout, re.M)
    assert len(headers) == int(match.group(1)), out.stdout
    finished = {tour.runs[name] for name in ("hello", "fanout", "template", "restarted")}
    assert {run for _, run in headers} <= finished, headers
    assert tour.runs["template"] in {run for _, run in headers}, headers
    again = tour.actors("inbox", "read")
    assert again.stdout.startswith("0 unread follow-up(s)"), again.stdout  # all were read


def run_inbox_wait(tour: Tour) -> list[Result]:
    """The waiter is started, found still blocked once its doorbell is armed, then a
    run's end (a one-command template spawned for it) wakes it."""
    sessions = tour.root / "sessions"
    proc = tour.popen("inbox-wait", "actors inbox wait --timeout 600")

    def armed() -> bool:
        return any(sessions.glob("*/doorbells/*")) or proc.poll() is not None

    wait_for_change(sessions, armed, what="the waiter's doorbell")
    tour.notes["waiter blocked"] = proc.poll() is None
    ok(tour.actors("spawn", "-t", "true", "--as", "run:wake"))
    out, err = proc.communicate(timeout=60)
    return [subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())]


def inbox_wait(tour: Tour, results: list[Result]) -> None:
    """`block (no polling) until a follow-up is unread; an agent's background watcher`"""
    (out,) = results
    assert tour.notes["waiter blocked"], "inbox wait returned with nothing unread"
    ok(out)
    assert out.stdout.startswith("ACTORS: 1 unread follow-up(s); first: "), out.stdout
    assert "wake" in out.stdout and "actors inbox read" in out.stdout, out.stdout


def tree_and_line(tour: Tour, results: list[Result]) -> None:
    """`runs, newest first, with their children and branches / a prompt indicator (▷▶▷)`"""
    tree, line = results
    ok(tree)
    ok(line)
    rows = {row.split()[0]: row for row in tree.stdout.splitlines() if row.strip()}
    assert {"music", "tick", tour.runs["fanout"], "wake"} <= set(rows), tree.stdout
    assert "running" in rows["music"], rows["music"]
    assert re.fullmatch(r"[▷▶]+\n", line.stdout) and "▶" in line.stdout, line.stdout


def check_and_tools(tour: Tour, results: list[Result]) -> None:
    """`validate every recipe; list tools with typed parameters`"""
    check, tools = results
    ok(check)
    ok(tools)
    checked = dict(line.rsplit(": ", 1) for line in check.stdout.splitlines())
    assert sorted(Path(p).stem for p in checked) == SHIPPED, checked
    assert set(checked.values()) == {"ok"}, checked
    assert f"{len(SHIPPED)} checked, 0 invalid" in check.stderr, check.stderr
    listed = re.findall(r"^(\S+)  \(shipped, (?:sync|async)\)", tools.stdout, re.M)
    assert sorted(listed) == SHIPPED, tools.stdout
    assert re.search(r"^\s+--scopes\s+array\s+required", tools.stdout, re.M), tools.stdout


def collab_branches(tour: Tour, results: list[Result]) -> None:
    """`a tool run in the foreground`: `--scopes api,ui` is two scopes, each a branch."""
    (out,) = results
    ok(out)
    assert out.stdout.startswith("2 of 2 scope branches ready"), out.stdout
    branches = re.findall(r"collab/collab-branches-[0-9a-z]{6}/(\S+)", out.stdout)
    assert sorted(branches) == ["api", "ui"], out.stdout


def backlog_swarm(tour: Tour, results: list[Result]) -> None:
    """`a swarm: one swarm.drained follow-up when done, branches to merge`: both workers
    take the backlog, the run ends done by itself, its owner has exactly one
    swarm.drained naming both branches, and no worktree is left."""
    (out,) = results
    ok(out)
    run = one_run_id(out, "backlog-implementers")
    tour.runs["swarm"] = run
    ended = tour.actors("wait", run, timeout=120)
    ok(ended)
    assert tour.status(run)["status"] == "done"
    told = tour.actors("inbox", "read", "--bodies")  # the merge steps are in the body
    ok(told)
    headers = re.findall(r"^\[actors\] follow-up (\S+) from (\S+) · delivery", told.stdout, re.M)
    drained = [sender for kind, sender in headers if kind == "swarm.drained"]
    assert len(drained) == 1 and drained[0].startswith(f"branch:{run}/"), told.stdout
    assert f"Run {run} drained: 2 done, 0 failed; 2 branches to merge" in told.stdout
    for worker in ("front", "back"):
        assert f" merge actors/{run}/{worker}" in told.stdout
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=tour.base / "project",
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.count("worktree ") == 1, listed.stdout  # only the project itself
    shown = tour.actors("result", run)
    ok(shown)
    assert f"  drained  Run {run} drained: 2 done, 0 failed" in shown.stdout, shown.stdout


def register_file(tour: Tour, results: list[Result]) -> None:
    """`a named follow-up target (then export ACTORS_SESSION=me)`"""
    (out,) = results
    ok(out)
    assert out.stdout == "me\n", out.stdout
    shown = tour.actors("session", "show", "me")
    ok(shown)
    assert json.loads(shown.stdout)["harness"] == "file"
    tour.env["ACTORS_SESSION"] = "me"  # as the comment says


def doctor(tour: Tour, results: list[Result]) -> None:
    """`probe that session's delivery for real: D0-D8 verdicts`"""
    (out,) = results
    ok(out)
    lines = out.stdout.splitlines()
    assert lines[0] == "DELIVERY_LEVELS:" and "harness=file" in lines, lines
    for level in range(9):
        assert any(re.match(rf"D{level} \w+: (pass|partial|fail|n/a) ", x) for x in lines), level
    assert any(x.startswith("D3 addressed_enqueue: pass") for x in lines), lines


def install_claude(tour: Tour, results: list[Result]) -> None:
    """The README's comment, Claude Code here, the others in the next step:
    `MCP server, wake hooks, status line (user config; also codex, opencode, kilo, pi, qwen-code, copilot)`
    """
    (out,) = results
    ok(out)
    home = Path(tour.env["HOME"])
    mcp = json.loads((home / ".claude.json").read_text())["mcpServers"]["actors"]
    assert mcp["args"][-1] == "mcp", mcp
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    hooks = settings["hooks"]
    assert hooks["SessionStart"][0]["hooks"][0]["command"].endswith("hook session-start")
    assert hooks["FileChanged"][0]["hooks"][0]["command"].endswith("hook file-changed")
    assert "status --line" in settings["statusLine"]["command"], settings["statusLine"]
    assert not (tour.project / ".mcp.json").exists()  # the user config, not the project


def run_install_others(tour: Tour) -> list[Result]:
    """The comment's `(also codex, opencode, kilo, pi, qwen-code, copilot)`: the same
    command with those names."""
    names = ("codex", "opencode", "kilo", "pi", "qwen-code", "copilot")
    return [tour.actors("install", name) for name in names]


def install_others(tour: Tour, results: list[Result]) -> None:
    assert len(results) == 6, results
    for out in results:
        ok(out)
    config = (Path(tour.env["HOME"]) / ".codex" / "config.toml").read_text()
    assert "[mcp_servers.actors]" in config, config
    opencode_config = Path(tour.env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    assert "actors" in json.loads(opencode_config.read_text())["mcp"]
    kilo_config = Path(tour.env["XDG_CONFIG_HOME"]) / "kilo" / "kilo.json"
    assert "actors" in json.loads(kilo_config.read_text())["mcp"]
    assert "qwen-stop" in (Path(tour.env["HOME"]) / ".qwen" / "settings.json").read_text()
    assert (Path(tour.env["HOME"]) / ".copilot" / "hooks" / "actors.json").is_file()
    agent = Path(tour.env["HOME"]) / ".pi" / "agent"
    assert "actors" in json.loads((agent / "mcp.json").read_text())["mcpServers"]
    assert (agent / "extensions" / "actors.js").is_file()


def register_opencode(tour: Tour, results: list[Result]) -> None:
    """`also codex, pi: docs/harnesses.md`: an OpenCode session is registered."""
    (out,) = results
    ok(out)
    assert out.stdout == "oc\n", out.stdout
    record = json.loads(tour.actors("session", "show", "oc").stdout)
    assert record["harness"] == "opencode", record
    assert record["options"]["session"] == "ses_tour", record


def completion(tour: Tour, results: list[Result]) -> None:
    """`shell completion (also zsh, fish): eval "$(actors completion bash)"`: bash loads
    it and completes `actors` with it; zsh and fish print their scripts."""
    (out,) = results
    ok(out)
    loaded = subprocess.run(
        ["bash", "--norc", "-c", 'eval "$1"; complete -p actors', "bash", out.stdout],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert loaded.returncode == 0 and "actors" in loaded.stdout, loaded
    for shell in ("zsh", "fish"):
        script = tour.actors("completion", shell)
        ok(script)
        assert "actors" in script.stdout and script.stdout != out.stdout, shell


def metrics(tour: Tour, results: list[Result]) -> None:
    """`runs, latencies, receipts, backlogs as Prometheus text (docs/metrics.md)`: text
    a strict parser reads, counting the tour's finished runs and its follow-ups' receipts.
    (The swarm may still be moving: no count is compared with a listing taken later.)"""
    from tests.dashboard.test_metrics import parse, value

    (out,) = results
    ok(out)
    series = parse(out.stdout)
    assert value(series, "actors_runs", status="done") >= 1
    assert value(series, "actors_spawn_latency_seconds_count") >= 1
    receipts = [v for (name, _), v in series.items() if name == "actors_delivery_receipts_total"]
    assert sum(receipts) >= 1
    assert (
        "actors_build_info",
        frozenset({("version", actors_version()), ("python", _py())}),
    ) in series


def actors_version() -> str:
    from actors._version import __version__

    return __version__


def _py() -> str:
    import platform

    return platform.python_version()


def run_mcp(tour: Tour) -> list[Result]:
    """The server answers an MCP client's handshake and tools/list, then stdin closes."""
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "tour", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    return [
        subprocess.run(
            tour.argv("actors mcp"),
            input="".join(json.dumps(r) + "\n" for r in requests),
            capture_output=True,
            text=True,
            env=tour.env,
            cwd=tour.project,
            timeout=120,
            check=False,
        )
    ]


def mcp_tools(tour: Tour, results: list[Result]) -> None:
    """`the same verbs as MCP tools over stdio (what install configures)`"""
    (out,) = results
    ok(out)
    answers = {m.get("id"): m for m in map(json.loads, out.stdout.splitlines())}
    names = {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert {"spawn", "message", "inspect", "inbox_read", "recipes"} <= names, names
    claude_json = Path(tour.env["HOME"]) / ".claude.json"
    installed = json.loads(claude_json.read_text())["mcpServers"]["actors"]
    assert installed["args"][-1] == "mcp"  # what install configures is this command


@dataclass(frozen=True)
class Step:
    line: str  # the README command, exactly
    check: Callable[[Tour, list[Result]], None]
    run: Callable[[Tour], list[Result]] | None = None  # default: the line, as written
    name: str = ""
    marks: tuple[Any, ...] = ()

    def execute(self, tour: Tour) -> list[Result]:
        if self.run is not None:
            return self.run(tour)
        return [tour.run(part) for part in self.line.replace(" / actors ", "\0actors ").split("\0")]


def _xfail(point: int, why: str) -> Any:
    return pytest.mark.xfail(strict=True, reason=f"issue 18 point {point}: {why}")


STEPS = [
    Step("actors spawn hello -v name=you --wait", spawn_hello),
    Step("actors spawn fanout --wait", spawn_fanout),
    Step("actors spawn ticker --as run:tick", spawn_ticker),
    Step("actors tail tick -f", tail_follow, run_tail_follow),
    Step("actors ls", ls_table),
    Step("actors status tick", status_one),
    Step("actors cancel tick", cancel_tick),
    Step("actors kill RUN", kill_run, run_kill),
    Step("actors result RUN", result_fanout, run_result),
    Step("actors wait RUN RUN ...", wait_several, run_wait_several),
    Step("actors restart RUN", restart_fanout, run_restart),
    Step("actors spawn -t 'sleep {secs=5}' -v secs=2", spawn_template),
    Step("actors archive RUN / actors prune RUN", archive_prune, run_archive_prune),
    Step("actors group set ci --parallel 2 / actors spawn ticker --group ci", group_and_queue),
    Step("actors spawn player --as run:music", spawn_player),
    Step("actors message run:music player.next", message_music),
    Step("actors inspect run:music --view messages", inspect_messages, run_inspect),
    Step("actors inbox read", inbox_read, run_inbox_read),
    Step("actors inbox wait --timeout 600", inbox_wait, run_inbox_wait),
    Step("actors ls --tree / actors status --line", tree_and_line),
    Step("actors recipes check / actors tools", check_and_tools),
    Step(
        "actors run collab-branches --scopes api,ui --repo . --agent_cmd 'claude -p'",
        collab_branches,
    ),
    Step(
        "actors spawn backlog-implementers -v backlog=TODO.md -v repo=. -v agent_cmd='codex exec'",
        backlog_swarm,
    ),
    Step("actors session register --harness file --id me", register_file),
    Step("actors doctor delivery --session me", doctor),
    Step("actors install claude-code", install_claude),
    Step(
        "actors install claude-code",
        install_others,
        run_install_others,
        name="also codex, opencode, kilo, pi, qwen-code, copilot",
    ),
    Step(
        "actors session register --harness opencode --id oc -o url=http://127.0.0.1:4096"
        " -o session=ses_...",
        register_opencode,
    ),
    Step("actors mcp", mcp_tools, run_mcp),
    Step("actors metrics", metrics),
    Step("actors completion bash", completion),
]

SKIPPED: dict[str, str] = {
    "actors host add alpha ssh://build@10.0.0.7 / actors spawn --host alpha -t 'make test'": (
        "needs an sshd host (root, ip netns); walked against two real sshd hosts by "
        "tests/hosts/test_hosts.py (test_add_ls_rm_two_hosts, "
        "test_runs_on_two_hosts_come_back_once)"
    ),
    "actors spawn swarm -v workers=4 -v hosts=alpha,beta -v cmd='make test-shard-$1'": (
        "needs two sshd hosts (root, ip netns); walked against two real sshd hosts by "
        "tests/hosts/test_host_swarm.py (test_a_swarm_spreads_its_workers_over_two_hosts, "
        "test_killing_the_swarm_kills_its_workers_on_their_hosts)"
    ),
}
"""Tour lines not run here, each with the reason."""


def test_every_tour_line_is_walked() -> None:
    lines = tour_lines()
    walked = {step.line for step in STEPS}
    assert [x for x in lines if x not in walked and x not in SKIPPED] == []
    assert sorted(walked - set(lines)) == []  # a step for a line the README no longer has
    ordered = [step.line for step in STEPS]
    assert ordered == sorted(ordered, key=lines.index)  # and in the README's order


def test_each_check_is_for_what_the_readme_says_now() -> None:
    """A check's docstring quotes its line's README comment: a changed promise fails here
    until its check is brought in line with it."""
    says = dict(readme_tour())
    stale = [
        (step.line, says[step.line])
        for step in STEPS
        if not step.name and f"`{says.get(step.line)}`" not in (step.check.__doc__ or "")
    ]
    assert stale == []


@pytest.fixture(scope="module", params=["checkout", "tool install"])
def tour(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tour]:
    """The tour walked twice: with this checkout's `actors`, and with the one `uv tool
    install` puts on a fresh HOME's PATH (what `make install` does), so every command the
    README shows works from a tool install as from the checkout."""
    installed = request.param == "tool install"
    with tour_world(tmp_path_factory.mktemp("tour"), installed=installed) as world:
        yield world


@pytest.mark.parametrize(
    "index",
    [
        pytest.param(i, id=f"{i:02d} {step.name or step.line[7:50]}", marks=step.marks)
        for i, step in enumerate(STEPS)
    ],
)
def test_tour_line(tour: Tour, index: int) -> None:
    """Walk the tour up to this line (earlier lines run even when deselected), run it,
    and check what its README comment says."""
    while tour.done <= index:
        step = STEPS[tour.done]
        tour.done += 1
        tour.results[tour.done - 1] = step.execute(tour)
        if tour.done - 1 != index:
            with contextlib.suppress(AssertionError):  # its own test reports it
                step.check(tour, tour.results[tour.done - 1])
    STEPS[index].check(tour, tour.results[index])

"""Issue 18 point 5: a crashed runner heals without a human (runtime.runner.guardian).

A runner is SIGKILLed while its session has the long-lived processes it already has (an
`actors inbox wait`, an `actors mcp` server speaking stdio MCP, a parent run's runner):
exactly one `run.exited` follow-up arrives within 5 s, the wait returns with it, and no
process of the run survives. Nothing is typed, no daemon runs. Also: a guardian started
after the crash folds it at start; racing guardians submit one follow-up; a pid now
owned by another process is neither watched as the runner nor signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import actors
from runtime.core.process import wait_gone
from runtime.delivery.sessions import SessionInbox
from runtime.messaging.boxes import run_mailbox
from runtime.runner.fold import fold_run
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, make_fifo, read_fifo_line, wait_for_change, wake_ups, write_recipe
from tests.reliability._report import record as report_row
from tests.reliability.test_attack_signals import Victim, _finished_looking_run, _rewrite

SESSION = "coord-heal"
FOLLOW_UP_WITHIN_S = 30.0
"""A crash's follow-up comes from a watch on the dead runner (a pidfd, or a lock a
thread waits on), never from a timer: without the watch nothing delivers it at all, so
the bound only has to tell "woken" from "never" — generous enough for a loaded CI
machine (5 s flaked there under a full parallel test run)."""
IDLE = {
    "template": 'sh -c \'sleep 300 & echo $! > "$2"; echo ready > "$1"; exec sleep 300\' i {f} {p}'
}


def _idle(tmp_path: Path, run_id: str, **spawn: Any) -> tuple[dict[str, Any], int]:
    """A live run whose command backgrounds a `sleep` (an orphan-to-be) and idles.
    Returns its run.json record and the background sleep's pid."""
    fifo, pidfile = make_fifo(tmp_path / f"{run_id}.ready"), tmp_path / f"{run_id}.pid"
    recipe = write_recipe(tmp_path, f"idle-{run_id}", IDLE)
    actors.spawn(str(recipe), as_=run_id, values={"f": str(fifo), "p": str(pidfile)}, **spawn)
    assert read_fifo_line(fifo) == "ready"
    record = json.loads(Path(actors.status(run_id)["state_dir"], "run.json").read_text())
    return record, int(pidfile.read_text())


def _runner(record: dict[str, Any]) -> int:
    return int(record["process_identity"]["pid"])


def _alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return data[data.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def _marked(instance: str) -> list[int]:
    """Live processes whose environment names this run instance (its commands), by /proc."""
    found = []
    needle = f"ACTORS_RUN_INSTANCE={instance}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env and _alive(int(name)):
            found.append(int(name))
    return found


def _watched_by(pid: int) -> set[int]:
    """The runners process `pid` has an exit watch on (runtime.core.platform.ExitWatch):
    the pid of each of its pidfds (the `Pid:` line of their fdinfo), and, on the portable
    path, the runner of each run whose liveness file it holds open (its watch's thread
    waits for a lock on it)."""
    pids: set[int] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return pids
    for name in names:
        try:
            text = Path(f"/proc/{pid}/fdinfo/{name}").read_text()
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pid:"):
                pids.add(int(line.split()[1]))
        if target.endswith("/.runner.lock"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                run = json.loads(Path(target).with_name("run.json").read_text())
                pids.add(int(run["pid"]))
    return pids


def _watching(home: StateRoot, watchers: list[int], runner: int) -> None:
    """Block until every watcher process holds an exit watch on the runner."""
    wait_for_change(
        home.path,
        lambda: all(runner in _watched_by(w) for w in watchers),
        what=f"guardians {watchers} watching runner {runner}",
    )


def _let_go(home: StateRoot, watchers: list[int], runner: int) -> None:
    """Block until no watcher has an exit watch on the runner: every guardian is done."""
    wait_for_change(
        home.path,
        lambda: not any(runner in _watched_by(w) for w in watchers),
        what=f"guardians {watchers} done with runner {runner}",
    )


def _exited_follow_ups(home: StateRoot, session: str, run_id: str) -> list[dict[str, Any]]:
    return [
        e
        for e in SessionInbox(session_paths(home, session)).entries()
        if e["envelope"].get("type") == "run.exited"
        and e["envelope"].get("from") == f"run:{run_id}"
    ]


def _events(home: StateRoot, run_id: str, kind: str) -> int:
    lines = home.run(run_id).events.read_text().splitlines()
    return sum(1 for line in lines if json.loads(line).get("event") == kind)


def _created(home: StateRoot, session: str, delivery_id: str) -> int:
    journal = session_paths(home, session).deliveries
    return sum(
        1
        for line in journal.read_text().splitlines()
        if json.loads(line).get("id") == delivery_id and json.loads(line).get("event") == "created"
    )


Waiter = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def waiter() -> Iterator[Waiter]:
    """Starts `actors inbox wait --session S` processes; each is stopped and its pipes
    closed when the test ends, failed or not (none outlives it, and no pipe is left for a
    later test's garbage collector to report)."""
    started: list[subprocess.Popen[str]] = []

    def start(session: str, *extra: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "actors", "inbox", "wait", "--session", session, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _returned(waiter: subprocess.Popen[str], home: StateRoot, run_id: str) -> tuple[str, str]:
    """The wait's output once it has returned; a wait still running after the bound
    fails with what it said on stderr (its guardian's log) and the run's state."""
    try:
        return waiter.communicate(timeout=FOLLOW_UP_WITHIN_S)
    except subprocess.TimeoutExpired:
        waiter.kill()
        _out, err = waiter.communicate()
        paths = home.run(run_id)
        tail = paths.events.read_text()[-600:] if paths.events.exists() else "(no events)"
        raise AssertionError(
            f"inbox wait {waiter.pid} not back within {FOLLOW_UP_WITHIN_S}s; its stderr: "
            f"{err!r}; status: {actors.status(run_id)}; followup marker: "
            f"{paths.followup.exists()}; events tail: {tail}"
        ) from None


def _mcp_pid(session: str) -> int:
    """The `actors mcp --session SESSION` process the SDK client started, found by /proc."""
    want = [b"-m", b"actors", b"mcp", b"--session", session.encode()]
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[:-1]
            except OSError:
                continue
            if argv[1:] == want and _alive(int(name)):
                return int(name)
    raise AssertionError(f"no actors mcp process for {session}")


async def test_a_sigkilled_runner_heals_through_inbox_wait_and_the_mcp_server(
    home: StateRoot, tmp_path: Path, waiter: Waiter
) -> None:
    """The must-show: SIGKILL a runner while its session has an `inbox wait` and an MCP
    server alive; one `run.exited` within 5 s, the wait returns with it, no orphan."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors", "mcp", "--session", SESSION],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        record, orphan = await trio.to_thread.run_sync(
            lambda: _idle(tmp_path, "crashy", session=SESSION)
        )
        wait = waiter(SESSION)
        runner, watchers = _runner(record), [wait.pid, _mcp_pid(SESSION)]
        await trio.to_thread.run_sync(_watching, home, watchers, runner)
        assert _marked(record["run_instance_id"]), "the run's commands should be running"

        os.kill(runner, signal.SIGKILL)
        killed = time.monotonic()
        out, err = await trio.to_thread.run_sync(lambda: _returned(wait, home, "crashy"))
        healed_s = time.monotonic() - killed
        assert wait.returncode == 0, err
        assert "Run crashy exited" in out, out
        assert healed_s < FOLLOW_UP_WITHIN_S
        print(f"SIGKILL -> run.exited follow-up -> inbox wait returned: {healed_s * 1000:.0f} ms")

        await trio.to_thread.run_sync(_let_go, home, watchers[1:], runner)
        follow_ups = _exited_follow_ups(home, SESSION, "crashy")
        assert len(follow_ups) == 1, follow_ups
        assert _created(home, SESSION, follow_ups[0]["id"]) == 1
        assert _events(home, "crashy", "run.exited") == 1
        assert not _alive(orphan), "the dead runner's background child survived"
        assert _marked(record["run_instance_id"]) == [], "a process of the run survived"
        assert actors.status("crashy")["status"] == "exited"
        report_row(
            "self-healing",
            "runner SIGKILLed; its session has an `inbox wait` and an `actors mcp` alive",
            1,
            f"1 `run.exited` follow-up, the wait returned {healed_s * 1000:.0f} ms after the"
            " kill; 0 processes of the run left",
        )
        # the MCP session reads it like any follow-up
        inbox = await client.call_tool("inbox_read", {})
        assert "crashy" in json.dumps(inbox.model_dump(mode="json"))


def test_a_guardian_started_after_the_crash_folds_it_at_start(
    home: StateRoot, tmp_path: Path
) -> None:
    record, orphan = _idle(tmp_path, "before", session=SESSION)
    os.kill(_runner(record), signal.SIGKILL)
    assert wait_gone([_runner(record)], timeout=30)
    assert _alive(orphan), "nothing may have folded it yet"
    started = time.monotonic()
    proc = cli("inbox", "wait", "--session", SESSION, "--timeout", str(FOLLOW_UP_WITHIN_S))
    assert proc.returncode == 0, proc.stderr
    assert "Run before exited" in proc.stdout
    assert time.monotonic() - started < FOLLOW_UP_WITHIN_S
    assert len(_exited_follow_ups(home, SESSION, "before")) == 1
    assert not _alive(orphan)
    assert _marked(record["run_instance_id"]) == []


def test_the_runner_is_locked_alive_from_the_instant_its_identity_is_public(
    home: StateRoot, tmp_path: Path
) -> None:
    """A watcher without a pidfd (the portable path) opens its exit watch on the identity
    spawn records, then blocks for a shared lock on the runner's liveness file. Held only
    once the runner had started Python, that lock was granted at once to a watcher that
    came first (the MCP server scans right after its own spawn returns): the guardian
    folded a live run, found nothing to do and never watched it again, so its crash was
    never followed up. Spawn takes the lock and hands it over; none of the run's commands
    holds it (the runner's death must release it)."""
    from runtime.core.platform import locked

    fds = tmp_path / "fds.txt"
    ready = make_fifo(tmp_path / "locked.ready")
    listing = 'ls -l /proc/self/fd/ > "$1"; echo ready > "$2"; exec sleep 300'
    recipe = write_recipe(tmp_path, "fds", {"template": f"sh -c '{listing}' x {{o}} {{f}}"})
    record = actors.spawn(str(recipe), as_="locked", values={"o": str(fds), "f": str(ready)})
    liveness = os.open(home.run("locked").liveness, os.O_RDONLY)
    try:
        assert locked(liveness), "spawn returned with the runner's identity, its lock not held"
        assert read_fifo_line(ready) == "ready"
        assert ".runner.lock" not in fds.read_text(), "a command holds the liveness lock"
        assert locked(liveness)
        os.kill(_runner(record), signal.SIGKILL)
        assert wait_gone([_runner(record)], timeout=30)
        assert not locked(liveness), "the dead runner's lock outlived it"
    finally:
        os.close(liveness)
        fold_run(home, home.run("locked"))  # the command the dead runner left: stopped


def test_racing_guardians_submit_exactly_one_follow_up(
    home: StateRoot, tmp_path: Path, waiter: Waiter
) -> None:
    """Four `inbox wait` processes watch the same runner; all wake on its death at once."""
    record, orphan = _idle(tmp_path, "raced", session=SESSION)
    waits = [waiter(SESSION) for _ in range(4)]
    runner = _runner(record)
    _watching(home, [w.pid for w in waits], runner)
    os.kill(runner, signal.SIGKILL)
    for wait in waits:
        out, err = _returned(wait, home, "raced")
        assert wait.returncode == 0 and "Run raced exited" in out, (out, err)
    follow_ups = _exited_follow_ups(home, SESSION, "raced")
    assert len(follow_ups) == 1, follow_ups
    assert _created(home, SESSION, follow_ups[0]["id"]) == 1
    assert _events(home, "raced", "run.exited") == 1
    assert not _alive(orphan)
    report_row(
        "self-healing",
        "runner SIGKILLed under 4 guardians (`inbox wait`) woken at once",
        4,
        "1 `run.exited` follow-up, 1 delivery, 1 `run.exited` event; all 4 waits returned",
    )


def _parent_with_child(tmp_path: Path, parent_template: Any) -> tuple[dict[str, Any], int]:
    """A parent run whose command spawns the idle run `kid` (owned by `run:parent`); a
    list template runs in parallel."""
    fifo, pidfile = make_fifo(tmp_path / "kid.ready"), tmp_path / "kid.pid"
    kid = write_recipe(tmp_path, "idle-kid", IDLE)
    parallel = isinstance(parent_template, list)
    parent = write_recipe(tmp_path, "parent", {"template": parent_template, "parallel": parallel})
    actors.spawn(
        str(parent), as_="parent", values={"k": str(kid), "f": str(fifo), "p": str(pidfile)}
    )
    assert read_fifo_line(fifo) == "ready"
    record = json.loads(Path(actors.status("kid")["state_dir"], "run.json").read_text())
    assert record["owner_id"] == "run:parent"
    return record, int(pidfile.read_text())


SPAWN_KID = 'actors spawn "$1" --as run:kid -v f="$2" -v p="$3"'


def _parent_messages(home: StateRoot, kind: str) -> list[dict[str, Any]]:
    return [
        e
        for e in run_mailbox(home.run("parent")).entries()
        if e["envelope"].get("type") == kind and e["envelope"].get("from") == "run:kid"
    ]


@pytest.mark.parametrize("graph", ["leaf", "parallel"])
def test_a_parent_runner_folds_its_crashed_child(
    home: StateRoot, tmp_path: Path, graph: str
) -> None:
    """The runs a run spawns follow up to its inbox: its runner guards them, parked or
    not, whatever its graph (one runner supervises every recipe)."""
    command = f"sh -c '{SPAWN_KID}; exec sleep 300' x {{k}} {{f}} {{p}}"
    template: Any = command if graph == "leaf" else [command, "sleep 300"]
    record, orphan = _parent_with_child(tmp_path, template)
    parent_runner = _runner(json.loads(home.run("parent").run_json.read_text()))
    assert '"mode":"poll"' in home.run("parent").events.read_text()
    _watching(home, [parent_runner], _runner(record))
    # the child dies while its parent is parked (runtime/runner/entry.py); on the
    # portable path a runner guarding a child stays up (its watch is a thread)
    if not os.environ.get("ACTORS_PORTABLE"):
        environ = Path(f"/proc/{parent_runner}/environ")
        wait_for_change(
            home.run("parent").dir,
            lambda: b"ACTORS_RUNNER_STATE=wait " in environ.read_bytes(),
            timeout=30,
            what="the parent's runner to park",
        )
    os.kill(_runner(record), signal.SIGKILL)
    killed = time.monotonic()
    wait_for_change(
        home.run("parent").dir,
        lambda: _parent_messages(home, "run.exited"),
        timeout=FOLLOW_UP_WITHIN_S,
        what="run.exited in the parent's inbox",
    )
    assert time.monotonic() - killed < FOLLOW_UP_WITHIN_S
    _let_go(home, [parent_runner], _runner(record))
    assert len(_parent_messages(home, "run.exited")) == 1
    assert not _alive(orphan)
    assert _marked(record["run_instance_id"]) == []
    actors.kill("parent")


def test_concurrent_folds_of_one_dead_run_deliver_once(home: StateRoot, tmp_path: Path) -> None:
    """Eight folds released at once on one dead child whose parent has ended (nothing
    guards it): its parent's inbox gets one `run.exited`. The parent's inbox has no
    deduplicating lock of its own; the run's fold lock is what keeps it to one."""
    record, orphan = _parent_with_child(tmp_path, f"sh -c '{SPAWN_KID}' x {{k}} {{f}} {{p}}")
    assert actors.wait("parent", timeout=60)["status"] == "done"
    os.kill(_runner(record), signal.SIGKILL)
    assert wait_gone([_runner(record)], timeout=30)
    gate = threading.Barrier(8)
    reports: list[dict[str, Any]] = []

    def fold() -> None:
        gate.wait()
        reports.append(fold_run(home, home.run("kid")))

    threads = [threading.Thread(target=fold) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(r["exited"] for r in reports) == 1
    assert sum(r["followed_up"] for r in reports) == 1
    assert len(_parent_messages(home, "run.exited")) == 1
    assert not _alive(orphan)
    report_row(
        "self-healing",
        "8 folds of one dead child run released at once (a parent inbox: no dedup of its own)",
        8,
        "1 published `exited`, 1 follow-up in the parent's inbox",
    )


def test_a_pid_now_owned_by_another_process_is_not_watched_nor_signalled(
    home: StateRoot,
) -> None:
    """The runner is dead and its pid (and session id) in run.json now name an unrelated
    `setsid sleep`: its start time differs, so the guardian neither takes it for the
    runner alive (it folds the run) nor signals it."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    victim = Victim(proc.pid, proc.pid)
    try:
        path, run = _finished_looking_run(home, "reused")
        run["process_identity"].update(pid=victim.pid, pgid=victim.pid, sid=victim.pid)
        _rewrite(path, run)
        done = cli("inbox", "wait", "--session", run["owner_id"], "--timeout", "10")
        assert done.returncode == 0, done.stderr
        # folded at the guardian's start (the run's old `done` follow-up, which has the
        # same delivery id, is what the wait reports); its events.jsonl holds the
        # runner's own run.done, so it is folded as that (run.folded), not `exited`
        assert _events(home, "reused", "run.folded") == 1
        assert home.run("reused").followup.exists()
        assert victim.alive(), "the guardian signalled the process that took the pid"
        assert "another process" in str(actors.status("reused").get("reason"))
    finally:
        victim.kill()
        proc.wait()


def test_an_idle_guardian_never_wakes(home: StateRoot, tmp_path: Path, waiter: Waiter) -> None:
    """Issue 21 builds on it: an `inbox wait` guarding a live run sleeps on its pidfd and
    doorbells, with no timer. Its context switches stay put over a second of idling."""
    record, _orphan = _idle(tmp_path, "quiet", session=SESSION)
    wait = waiter(SESSION)
    try:
        _watching(home, [wait.pid], _runner(record))

        # measured once it has settled: the pidfd is held before setup has quite ended
        assert wake_ups([wait.pid], 1.0)[wait.pid] == 0, "the idle guardian woke up"
    finally:
        actors.kill("quiet", session=SESSION)


async def test_the_mcp_server_guards_each_session_that_calls_it(
    home: StateRoot, tmp_path: Path
) -> None:
    """One `actors mcp` serves several Codex threads (or OpenCode sessions): a run spawned
    through it for a thread the server met only on that call is guarded too, so its crash
    reaches that thread's session once, within 5 s, with nothing else of the session
    alive (no `inbox wait` for it)."""
    thread_session = "codex-thread-heal"
    fifo, pidfile = make_fifo(tmp_path / "mcp.ready"), tmp_path / "mcp.pid"
    recipe = write_recipe(tmp_path, "idle-mcp", IDLE)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors", "mcp", "--session", SESSION],
        env={k: v for k, v in os.environ.items() if k != "ACTORS_SESSION"},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        arguments = {
            "file": str(recipe),
            "as": "run:mcp-crashy",
            "values": {"f": str(fifo), "p": str(pidfile)},
        }
        spawned = await client.call_tool("spawn", arguments, meta={"threadId": "thread-heal"})
        assert not spawned.is_error, spawned.content
        assert await trio.to_thread.run_sync(read_fifo_line, fifo) == "ready"
        status = actors.status("mcp-crashy")
        assert status["owner_id"] == thread_session
        record = json.loads(Path(status["state_dir"], "run.json").read_text())
        runner, orphan = _runner(record), int(pidfile.read_text())
        await trio.to_thread.run_sync(_watching, home, [_mcp_pid(SESSION)], runner)

        os.kill(runner, signal.SIGKILL)
        killed = time.monotonic()
        await trio.to_thread.run_sync(
            lambda: wait_for_change(
                home.path,
                lambda: _exited_follow_ups(home, thread_session, "mcp-crashy"),
                timeout=FOLLOW_UP_WITHIN_S,
                what="the thread's run.exited follow-up",
            )
        )
        assert time.monotonic() - killed < FOLLOW_UP_WITHIN_S
        await trio.to_thread.run_sync(_let_go, home, [_mcp_pid(SESSION)], runner)
        assert len(_exited_follow_ups(home, thread_session, "mcp-crashy")) == 1
        assert _exited_follow_ups(home, SESSION, "mcp-crashy") == []
        assert not _alive(orphan), "the dead runner's background child survived"

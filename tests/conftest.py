"""Shared fixtures: a private state root per test, the real CLI, FIFO barriers."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Every lock wait in this process and what it starts is bounded: a lock that a paused
# process (ACTORS_PAUSE_AT, SIGSTOP) holds fails the waiting test with the lock's name
# instead of hanging the suite until pytest-timeout (runtime.store.appends.take_lock).
os.environ.setdefault("ACTORS_LOCK_BOUND", "60")

from runtime.store.layout import StateRoot  # (imported after the bound is set)

# Ctrl-C reaches what the tests start: a suite started in the background by a
# non-interactive shell (`.ci/run &`, nohup) inherits SIGINT ignored, and an ignored
# signal stays ignored across exec, so every `actors` a test interrupts would go on.
# A handled signal is reset to its default at exec: the children get Ctrl-C back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("ACTORS_PEERS", REPO / ".peers"))
"""The real harnesses `make peers` installs (tests/peers); ACTORS_PEERS points elsewhere
(scripts/peers_newest.py: the newest versions beside the pins)."""


def _peers_node_first() -> None:
    """The Node `make peers` installs (.peers/node/bin, from PyPI: pi and Claude Code declare
    Node >= 22) first on PATH for this process and all it starts, so a harness's
    `#!/usr/bin/env node` and the tests that run node themselves use it, not the machine's."""
    node = PEERS / "node" / "bin"
    path = os.environ.get("PATH", "")
    if (node / "node").exists() and path.split(os.pathsep)[0] != str(node):
        os.environ["PATH"] = os.pathsep.join([str(node), path])


_peers_node_first()
_ENV_TO_CLEAR = (
    "ACTORS_SESSION",
    "ACTORS_RUN_ID",
    "ACTORS_RUN_TOKEN",
    "ACTORS_STATE_DIR",
    "ACTORS_ADDRESS",
    "ACTORS_RUN_INSTANCE",
    "ACTORS_BRANCH",
)


def isolate(mp: pytest.MonkeyPatch, base: Path, root: Path) -> None:
    """Point this process (and what it starts) at the state root `root`, a config dir and
    working directory under `base`, with no run or session identity inherited."""
    mp.setenv("ACTORS_HOME", str(root))
    mp.setenv("XDG_CONFIG_HOME", str(base / "config"))
    for name in _ENV_TO_CLEAR:
        mp.delenv(name, raising=False)
    mp.chdir(base)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StateRoot]:
    """A fresh state root (and config dir) for one test; leftover runs are killed after."""
    root = tmp_path / "state"
    isolate(monkeypatch, tmp_path, root)
    monkeypatch.setenv("ACTORS_KILL_GRACE", "2")
    state = StateRoot(root)
    yield state
    _reap_runs(state)


def _reap_runs(state: StateRoot) -> None:
    from runtime.core import cgroups
    from runtime.core.process import kill_session
    from runtime.views.status import load_run

    if not state.runs.exists():
        return
    for run_dir in state.runs.iterdir():
        with contextlib.suppress(Exception):  # every process a run ever started, first
            cgroups.kill(cgroups.groups_of(state.path, run_dir.name))
        with contextlib.suppress(Exception):
            identity = load_run(state.run(run_dir.name)).get("process_identity") or {}
            if identity.get("sid"):
                kill_session(int(identity["sid"]))


def cli(
    *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real `actors` command line in a subprocess."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "actors", *args],
        capture_output=True,
        text=True,
        input=input,
        env=full_env,
        timeout=timeout,
        check=False,
    )


AS_CLAUDE = """
import os, subprocess, sys
env = dict(os.environ, CLAUDE_PID=os.environ.get("FAKE_CLAUDE_PID") or str(os.getpid()))
hook = [sys.executable, "-m", "actors", "hook", "stop"]
done = subprocess.run(hook, input=sys.stdin.read(), env=env, text=True, capture_output=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
"""


def stop_hook_as_claude(
    hook_input: dict[str, Any], *claude_args: str, entrypoint: str = "sdk-cli", **env: str
) -> subprocess.CompletedProcess[str]:
    """`actors hook stop` run as Claude Code runs it, under a parent process that stands
    in for Claude: its argv is `claude_args` (`-p PROMPT`: a headless `claude -p`), its
    pid is $CLAUDE_PID (or FAKE_CLAUDE_PID's), CLAUDE_CODE_ENTRYPOINT is `entrypoint`.
    Its stdout and stderr are the hook's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE")}
    return subprocess.run(
        [sys.executable, "-c", AS_CLAUDE, *claude_args],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "CLAUDE_CODE_ENTRYPOINT": entrypoint, **env},
        check=False,
    )


def cli_imports(
    argv: list[str], *, top_level: bool = False, stdin: str | None = None
) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Run the CLI with `argv` in a fresh interpreter (the real entry point, no click
    unless the command needs it) and return the modules it ended with (their top-level
    packages with `top_level`) and the process: what a command costs to import."""
    import json

    names = "{m.split('.')[0] for m in sys.modules}" if top_level else "sys.modules"
    probe = (
        f"import sys; sys.argv=['actors', *{argv!r}]\n"
        # a hook ends its process at once (actors.cli.hooks.EXIT_AT_ONCE): not here
        + (
            "import actors.cli.hooks; actors.cli.hooks.EXIT_AT_ONCE = False\n"
            if argv[:1] == ["hook"]
            else ""
        )
        + "from actors.cli import main\n"
        "try: main()\nexcept SystemExit: pass\n"
        f"print('LOADED', sorted({names}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], input=stdin, capture_output=True, text=True, check=False
    )
    loaded = set(json.loads(out.stdout.split("LOADED ", 1)[1].replace("'", '"')))
    return loaded, out


def snapshot(path: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under `path` with its mode and size."""
    if not path.exists():
        return {}
    out = {}
    for item in sorted(path.rglob("*")):
        st = item.lstat()
        out[str(item.relative_to(path))] = (st.st_mode, st.st_size if item.is_file() else 0)
    return out


def make_fifo(path: Path) -> Path:
    os.mkfifo(path, 0o600)
    return path


def read_fifo_line(path: Path, timeout: float = 30.0) -> str:
    """Block until a writer puts a whole line into the FIFO (a cross-process barrier)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"nothing arrived on {path} within {timeout}s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                buffer += os.read(fd, 4096)
        return buffer.decode().split("\n", 1)[0]
    finally:
        os.close(fd)


def wait_for_change(
    directory: Path, condition: Callable[[], object], timeout: float = 30, what: str = ""
) -> None:
    """Block until `condition()` holds, re-checking on each file event under `directory`
    (inotify through watchfiles, not a sleep loop). The watcher re-checks at least every
    200 ms too, which bounds an event that landed before it was armed."""
    import watchfiles

    if condition():
        return
    deadline = time.monotonic() + timeout
    for _ in watchfiles.watch(
        directory,
        watch_filter=None,
        debounce=20,
        step=5,
        rust_timeout=200,
        yield_on_timeout=True,
        force_polling=False,
    ):
        if condition():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout}s: {what or condition}")


def wait_listening(path: Path, process: subprocess.Popen[Any], timeout: float = 30) -> None:
    """Wait until a server we started accepts connections on its Unix socket `path`
    (woken by the socket's creation); RuntimeError if the server exits first."""
    import socket

    def listening() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited ({process.returncode}) before {path}")
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(path))
            except OSError:
                return False
        return True

    watched = path.parent
    while not watched.is_dir():  # the server may create the socket's directory itself
        watched = watched.parent
    wait_for_change(watched, listening, timeout, what=f"{path} accepting connections")


def alive(pid: int) -> bool:
    from runtime.core.process import is_gone

    return not is_gone(pid)


def write_recipe(directory: Path, name: str, recipe: dict[str, Any]) -> Path:
    import json

    path = directory / f"{name}.json"
    path.write_text(json.dumps(recipe))
    return path


def idle_run(tmp_path: Path, accepts: tuple[str, ...] = ("job.item",)) -> dict[str, Any]:
    """A live run that accepts `accepts` and never consumes them (messages stay queued),
    returned once its command is up."""
    import actors

    fifo = make_fifo(tmp_path / "ready.fifo")
    recipe = write_recipe(
        tmp_path,
        "idle",
        {
            "mailbox": {"accepts": list(accepts)},
            "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' x {f}",
        },
    )
    record = actors.spawn(str(recipe), values={"f": str(fifo)})
    assert read_fifo_line(fifo) == "ready"
    return record


@pytest.fixture
def stray_process() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process (used to impersonate a recycled pid)."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def finished(record: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """Wait until a run is terminal and its runner has exited (follow-ups attempted)."""
    import actors
    from runtime.core.process import wait_gone

    summary = actors.wait(record["run"], timeout=timeout)
    assert wait_gone([int(record["pid"])], timeout=timeout), "runner did not exit"
    return summary


def run_token(run_dir: Path) -> str:
    """A live run's token, as its processes get it: from the environment of the run's
    processes (the state directory holds only a verifier). Same-user processes can read
    each other's /proc/<pid>/environ; that is the documented limit of run tokens."""
    import json

    runner = json.loads((run_dir / "run.json").read_text())["pid"]
    pids = [runner]
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{name}/stat").read_bytes()
                if int(stat[stat.rindex(b")") + 2 :].split()[3]) == runner:
                    pids.append(int(name))
    for pid in pids:
        with contextlib.suppress(OSError):
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                if item.startswith(b"ACTORS_RUN_TOKEN="):
                    return item.split(b"=", 1)[1].decode()
    raise AssertionError(f"no process of {run_dir.name} carries its token")


@pytest.fixture
def umask_000() -> Iterator[None]:
    """The most permissive umask, for the test's duration: what actors creates must be
    private anyway."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def runner_parked(pid: int) -> bool:
    """Whether a runner has parked: exec'd into its idle image, which marks itself in its
    environment (the only sign outside the process; the exec costs a few ticks)."""
    try:
        return b"ACTORS_RUNNER_STATE=wait " in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def runner_mode(state: StateRoot, run: str, timeout: float = 30) -> str:
    """How a run's runner waits ("poll", or "poll-portable"), from its `run.runner.start`
    event, which follows spawn's return: awaited on the run directory's file events."""
    import json

    events = state.run(run).events
    found: list[str] = []

    def started() -> bool:
        for line in events.read_text().splitlines() if events.exists() else []:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being appended as we read
            if event.get("event") == "run.runner.start":
                found.append(str(event.get("mode")))
                return True
        return False

    wait_for_change(state.run(run).dir, started, timeout, what=f"{run}'s runner started")
    return found[0]


def runner_at_rest(state: StateRoot, record: dict[str, Any], timeout: float = 30) -> str:
    """Wait until a live run's runner is past its start-up work and has parked (an
    idle-CPU measurement must not count the park's exec), and name its mode."""
    mode = runner_mode(state, str(record["run"]), timeout)
    deadline = time.monotonic() + timeout
    while not runner_parked(int(record["pid"])):
        assert time.monotonic() < deadline, f"runner of {record['run']} not parked in {timeout}s"
        time.sleep(0.01)  # nothing outside the process announces an exec: poll /proc
    return mode


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """A process paused at a fault point reports, then SIGSTOPs itself: wait for the stop.

    A child of ours is awaited with waitid(WSTOPPED); a detached runner is not our child
    and Linux offers no stop notification for it short of ptrace, so its /proc state is
    re-read until it shows `T` (microseconds after the barrier line, in practice)."""
    from runtime.core.process import read_stat

    try:
        os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)  # no hang on exit
        return
    except ChildProcessError:
        pass
    deadline = time.monotonic() + timeout
    while (stat := read_stat(pid)) is not None and stat.state != "T":
        assert time.monotonic() < deadline, f"pid {pid} never stopped"
        time.sleep(0.002)


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of `pid` so far, in clock ticks (os.sysconf("SC_CLK_TCK")
    a second); exec keeps the count, so a parked runner's figure includes its start."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def context_switches(pid: int) -> int:
    """Context switches of every thread of `pid` so far: each wake-up adds at least one."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # a thread that just ended
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


def wake_ups(pids: list[int], window: float) -> dict[int, int]:
    """How many times each process ran during `window` seconds, once all of them have
    settled (a 0.3 s stretch without a switch; start-up work is not an idle wake)."""
    deadline = time.monotonic() + 30
    while True:
        before = {p: context_switches(p) for p in pids}
        time.sleep(0.3)  # the settle probe itself: an observation window, not a sync
        if {p: context_switches(p) for p in pids} == before:
            break
        assert time.monotonic() < deadline, "the run never went idle"
    before = {p: context_switches(p) for p in pids}
    time.sleep(window)  # the measurement window
    return {p: context_switches(p) - before[p] for p in pids}

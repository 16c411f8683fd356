"""Parking a runner and waking it: its state across exec(), its first start and resume.

An idle runner (runtime.runner.loop) holds the runtime's modules it imported (~8 MB of the
interpreter's heap) for nothing. Parking exec()s the same argv (runtime/runner/entry.py)
with the runner's state in a memfd (a private file on the portable path): the pid, start
time, argv and cwd stay, so its recorded identity still verifies and its guardians' exit
watches stay on it; its children and inheritable descriptors stay too (the commands,
their pipes, the captures, the logs, the doorbells, the children's exit watches). The
parked image imports nothing of the runtime and exec()s back here (`resume`) on any
event: output, a command's exit, a doorbell, a child runner's exit, a signal (blocked
across each exec, so none is lost) or the graph's next deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime.core import config, platform
from runtime.core.faults import pause_point
from runtime.runner import lifecycle
from runtime.runner.graph import Graph
from runtime.runner.lifecycle import begin, conclude, crash, new_context
from runtime.runner.loop import LINGER_MAX_S, LINGER_MIN_S, Runner, stop_signals
from runtime.store.layout import RunPaths
from runtime.store.reads import read_json

if TYPE_CHECKING:
    from runtime.runner.guardian import Guard
    from runtime.store.records import RunRecord


def first(args: list[str]) -> int:
    """The runner's first start: record its identity, then run the graph."""
    if len(args) != 1:
        print("usage: runtime/runner/entry.py STATE_DIR", file=sys.stderr)
        return 2
    begun = begin(args[0], mode=lambda run: _mode())
    if isinstance(begun, int):
        return begun
    paths, run = begun
    runner = _runner(paths, run)
    try:
        runner.listen()
        runner.watch_signals()
        if run.get("after") or run.get("group"):
            from runtime.runner.gate import Gate
            from runtime.store.layout import StateRoot

            runner.gate = Gate(StateRoot.from_env(), dict(run))
        runner.start()
    except BaseException as exc:  # no descriptor left, say: it still ends with a result
        with contextlib.suppress(Exception):  # what it holds is released at exit anyway
            runner.close()
        return crash(paths, run, exc)
    return supervise(runner)


def _mode() -> str:
    """How this runner waits, as recorded in `run.runner.start`: one poll() loop, parked
    when idle, whatever the graph (the primitives it uses are recorded beside it)."""
    return "poll"


def _runner(paths: RunPaths, run: RunRecord) -> Runner:
    ctx = new_context(paths, run)
    runner = Runner(paths, run, ctx)
    runner.park = park
    runner.started_at = runner.started_at or _now()

    def command_done(record: dict[str, Any]) -> None:
        from runtime.runner.steps import Deliveries, command_done

        if runner.deliveries is None:
            runner.deliveries = Deliveries()
        command_done(paths, run, ctx, record, runner.deliveries)

    ctx.on_command_done = command_done
    return runner


def _now() -> str:
    from runtime.core.ids import now_iso

    return now_iso()


def supervise(runner: Runner) -> int:
    """Run the graph to its end, then end the run; a crash still ends it with a result."""
    try:
        outcome = runner.supervise()
    except BaseException as exc:  # the run must still end with a result
        with contextlib.suppress(Exception):  # what it holds is released at exit anyway
            runner.close()
        return crash(runner.paths, runner.run, exc)
    runner.close()
    code = conclude(
        runner.paths,
        runner.run,
        runner.ctx,
        outcome,
        (runner.started, runner.started_at),
        runner.deliveries,
    )
    if runner.gate is not None:
        runner.gate.release()  # the end is written and its processes are gone
    return code


# --- across exec ----------------------------------------------------------------------


def snapshot(runner: Runner) -> dict[str, Any]:
    """Everything a resumed image needs that is not in the run's files."""
    return {
        "graph": runner.graph.snapshot(),
        "ctx": runner.ctx.snapshot(),
        "bells": {n: [b.read, b.write, str(b.path)] for n, b in runner.bells.items()},
        "guard": None if runner.guard is None else _guard(runner.guard),
        "gate": None if runner.gate is None else runner.gate.snapshot(),
        "graph_started": runner.graph_started,
        "retire": [runner.retire_at, runner.retire_seen],
        "stopped": runner.stopped,
        "started": runner.started,
        "started_at": runner.started_at,
        "last_event": runner.last_event,
        "liveness": lifecycle.liveness,
    }


def _guard(guard: Guard) -> dict[str, Any]:
    bell = guard.bell
    watches = {run_id: w.fd for run_id, w in guard.watches.items()}
    return {"bell": [bell.read, bell.write, str(bell.path)], "watches": watches}


def _kept(runner: Runner) -> list[int]:
    """The descriptors the next image must inherit."""
    fds = [fd for bell in runner.bells.values() for fd in (bell.read, bell.write)]
    if runner.guard is not None:
        fds += [runner.guard.bell.read, runner.guard.bell.write]
        fds += [w.fd for w in runner.guard.watches.values()]
    fds += runner.gate.kept() if runner.gate is not None else []
    fds += runner.graph.fds_kept() + runner.ctx.fds_kept()
    return fds + ([lifecycle.liveness] if lifecycle.liveness >= 0 else [])


def _waited(runner: Runner) -> list[int]:
    """The descriptors the parked image waits on (any of them wakes it)."""
    bells = [bell.read for bell in runner.bells.values()]
    guard = runner.guard.fds() if runner.guard is not None else []
    gate = runner.gate.fds() if runner.gate is not None else []
    return bells + guard + gate + list(runner.graph.fds())


def exec_self(setting: str) -> None:
    """exec() this process's own argv (so its identity stays), with `setting` as
    ACTORS_RUNNER_STATE; the signals stay blocked until the next image takes them."""
    env = dict(os.environ)
    env[config.RUNNER_STATE.name] = setting
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)


def park(runner: Runner) -> None:
    """exec() into the idle wait; returns (staying up) if exec failed, or if a signal
    came since the loop last looked (it is handled here; the loop goes on).

    The signals are blocked first: from then on one that arrives stays pending and
    crosses exec to the idle image. One that arrived before, since the loop's last
    poll, is only a byte in this image's wakeup pipe, which exec would close: a
    SIGTERM lost that way never stops the run, and on the portable path a command's
    SIGCHLD lost that way leaves its run waiting for an end it was already told of."""
    pause_point("runner.before_park")
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals())
    if _arrived_meanwhile(runner):
        return
    try:
        _exec_parked(runner)  # returns only when it could not park
    finally:  # staying up: the signals are this image's again
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())


def _exec_parked(runner: Runner) -> None:
    """Write the runner's state and exec() into the idle wait. Where the state cannot be
    written or exec fails, it returns with nothing left open, and the runner lingers
    longer rather than try again at once."""
    state = snapshot(runner)
    try:
        fd = platform.state_fd(str(runner.paths.dir))
    except OSError:
        runner.linger = LINGER_MAX_S  # no place for the state: stay up
        return
    try:
        view = memoryview(json.dumps(state).encode())
        while view:
            view = view[os.write(fd, view) :]
        for kept in [fd, *_kept(runner)]:
            os.set_inheritable(kept, True)
        gate_at = runner.gate.deadline() if runner.gate is not None else None
        times = [t for t in (runner.graph.deadline(), runner.retire_at, gate_at) if t is not None]
        deadline = repr(min(times)) if times else "-"
        waited = ",".join(str(w) for w in _waited(runner))
        signals = ",".join(str(int(s)) for s in stop_signals())
        exec_self(f"wait {fd} {deadline} {waited} {signals}")
    except OSError:  # a full disk under the state file, or exec itself
        os.close(fd)
        for kept in _kept(runner):
            os.set_inheritable(kept, False)
        runner.linger = LINGER_MAX_S


def _arrived_meanwhile(runner: Runner) -> bool:
    """Signals already in the wakeup pipe (the caller has blocked the rest): handled
    now, with the signals unblocked again; True if there were any."""
    try:
        arrived = os.read(runner.wakeup, 64) if runner.wakeup >= 0 else b""
    except OSError:  # BlockingIOError: nothing came
        arrived = b""
    if not arrived:
        return False
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())
    runner.signalled(arrived)
    return True


def _adopt_guard(saved: dict[str, Any], run: RunRecord) -> Guard:
    """The guardian of this run's children as the parked image kept it (pidfds only:
    a runner with a portable exit watch never parks, runtime.runner.loop)."""
    from runtime.core.platform import ExitWatch
    from runtime.messaging.doorbells import Bell
    from runtime.runner.guardian import Guard
    from runtime.store.layout import StateRoot

    read, write, path = saved["bell"]
    watches = {run_id: ExitWatch(fd) for run_id, fd in saved["watches"].items()}
    return Guard(StateRoot.from_env(), f"run:{run['run']}", Bell(read, write, Path(path)), watches)


def _read_state(fd: int) -> dict[str, Any]:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return cast("dict[str, Any]", json.loads(b"".join(chunks)))


def resume(args: list[str], state_fd: int, signums: list[int]) -> int:
    """Back from the idle wait: the same run, picked up where it parked."""
    from runtime.messaging.doorbells import Bell

    state = _read_state(state_fd)
    paths = RunPaths(Path(args[0]))
    run = cast("RunRecord", read_json(paths.run_json))
    runner = _runner(paths, run)
    runner.ctx.restore(state["ctx"])
    runner.graph = Graph.restore(runner.ctx, run["template"], state["graph"])
    runner.bells = {n: Bell(r, w, Path(p)) for n, (r, w, p) in state["bells"].items()}
    if state["guard"] is not None:
        runner.guard = _adopt_guard(state["guard"], run)
    if state["gate"] is not None:
        from runtime.runner.gate import Gate
        from runtime.store.layout import StateRoot

        runner.gate = Gate.restore(StateRoot.from_env(), dict(run), state["gate"])
    runner.graph_started = state["graph_started"]
    runner.retire_at, runner.retire_seen = state["retire"]
    runner.stopped = state["stopped"]
    runner.started, runner.started_at = state["started"], state["started_at"]
    lifecycle.liveness = state["liveness"]
    for fd in _kept(runner):  # a command started from now on inherits none of them
        os.set_inheritable(fd, False)
    runner.watch_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals())
    if signums:
        runner.signalled(bytes(signums))
    quiet = time.monotonic() - state["last_event"]
    runner.linger = min(LINGER_MAX_S, max(LINGER_MIN_S, 2 * quiet))
    return supervise(runner)

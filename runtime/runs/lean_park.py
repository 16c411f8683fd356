"""Parking a lean runner and waking it: its state across exec(), and its first start.

An idle lean runner (runtime.runs.lean) holds the runtime's modules it imported (~8 MB
of the interpreter's heap) for nothing. Parking exec()s the same argv
(runtime/runs/entry.py) with the runner's state in a memfd: the pid, start time, argv
and cwd stay, so its recorded identity still verifies and its guardians' pidfds stay
on it; its children and inheritable descriptors stay too (the command, its pipes, the
captures, the logs, the doorbells). The parked image imports nothing of the runtime and
exec()s back here (`resume`) on any event: output, the command's exit, a doorbell, a
child runner's exit, a stop signal (blocked across each exec, so none is lost) or the
command's timeout.
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

from runtime.core import config
from runtime.runs.context import Outcome
from runtime.runs.leaf import Exit, Leaf, begin_leaf, end_leaf
from runtime.runs.lean import LINGER_MAX_S, LINGER_MIN_S, STOP_SIGNALS, Lean, handles
from runtime.runs.lean_parts import Stream
from runtime.runs.output import Capture, LogFile, StreamMasker
from runtime.runs.runner import begin, crash_result, earned, end, finish, new_context, run_full
from runtime.store.layout import RunPaths
from runtime.store.reads import read_json

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


def first(args: list[str]) -> int:
    """The runner's first start: record its identity, then the lean or the trio runner."""
    if len(args) != 1:
        print("usage: runtime/runs/entry.py STATE_DIR", file=sys.stderr)
        return 2
    begun = begin(args[0], mode=lambda run: "lean" if handles(run) else "trio")
    if isinstance(begun, int):
        return begun
    paths, run = begun
    return start(paths, run) if handles(run) else run_full(paths, run)


def _hex(data: bytes) -> str:
    return data.hex()  # (no base64: its import costs more than the hex of a few bytes)


def snapshot(lean: Lean) -> dict[str, Any]:
    """Everything a resumed image needs that is not in the run's files."""
    leaf = lean.leaf
    assert leaf is not None
    ctx = lean.ctx
    return {
        "pid": lean.pid,
        "pidfd": lean.pidfd,
        "deadline": lean.deadline,
        "started": lean.started,
        "started_at": lean.started_at,
        "last_event": lean.last_event,
        "counts": [ctx.active, ctx.completed, ctx.failed],
        "leaf": {
            "argv": leaf.argv,
            "kind": leaf.kind,
            "common": leaf.common,
            "attempt": leaf.attempt,
            "started": leaf.started,
            "captures": [[c.fd, c.total, c.cap] for c in (leaf.out, leaf.err)],
        },
        "logs": {name: [ctx.log(name).fd, ctx.log(name).size] for name in ("stdout", "stderr")},
        "streams": [[s.fd, _hex(s.masker.held), _hex(s.lines.pending)] for s in lean.streams],
        "bells": {name: list(bell) for name, bell in lean.bells.items()},
        "children": lean.children,
    }


def _kept(state: dict[str, Any]) -> list[int]:
    """The descriptors the next image must inherit."""
    fds = [state["pidfd"]]
    fds += [c[0] for c in state["leaf"]["captures"]] + [log[0] for log in state["logs"].values()]
    fds += [s[0] for s in state["streams"] if s[0] >= 0]
    fds += [fd for bell in state["bells"].values() for fd in bell[:2]]
    return fds + list(state["children"].values())


def _waited(state: dict[str, Any]) -> list[int]:
    """The descriptors the parked image waits on (any of them wakes it)."""
    fds = [state["pidfd"], *(s[0] for s in state["streams"] if s[0] >= 0)]
    return fds + [bell[0] for bell in state["bells"].values()] + list(state["children"].values())


def exec_self(setting: str) -> None:
    """exec() this process's own argv (so its identity stays), with `setting` as
    ACTORS_RUNNER_STATE; the stop signals are blocked until the next image handles them."""
    env = dict(os.environ)
    env[config.RUNNER_STATE.name] = setting
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)


def park(lean: Lean) -> None:
    """exec() into the idle wait; returns (staying up) only if exec failed."""
    state = snapshot(lean)
    memfd = os.memfd_create("actors-runner-state", 0)
    data = json.dumps(state).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(memfd, view) :]
    for fd in [memfd, *_kept(state)]:
        os.set_inheritable(fd, True)
    deadline = "-" if lean.deadline is None else repr(lean.deadline)
    waited = ",".join(str(fd) for fd in _waited(state))
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        exec_self(f"wait {memfd} {deadline} {waited}")
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        os.close(memfd)
        lean.linger = LINGER_MAX_S  # stay up rather than try again at once


def _read_state(memfd: int) -> dict[str, Any]:
    chunks = []
    os.lseek(memfd, 0, os.SEEK_SET)
    while chunk := os.read(memfd, 1 << 16):
        chunks.append(chunk)
    os.close(memfd)
    return cast("dict[str, Any]", json.loads(b"".join(chunks)))


def _restore(lean: Lean, state: dict[str, Any]) -> None:
    ctx, paths = lean.ctx, lean.paths
    ctx.active, ctx.completed, ctx.failed = state["counts"]
    for name, (fd, size) in state["logs"].items():
        path = paths.stdout if name == "stdout" else paths.stderr
        ctx.adopt_log(name, LogFile.adopt(path, config.byte_count(config.LOG_CAP_BYTES), fd, size))
    saved = state["leaf"]
    capture = paths.capture(saved["common"]["command_id"])
    out, err = (
        Capture.adopt(path, cap, fd, total)
        for path, (fd, total, cap) in zip(
            (capture.stdout, capture.stderr), saved["captures"], strict=True
        )
    )
    node = lean.run["template"]
    ended = Exit(status="cancelled")
    lean.leaf = Leaf(
        node, saved["argv"], saved["kind"], capture, out, err, saved["common"],
        saved["attempt"], saved["started"], False, ended,
    )  # fmt: skip
    for (fd, held, pending), cap, name in zip(
        state["streams"], (out, err), ("stdout", "stderr"), strict=True
    ):
        masker = StreamMasker(ctx.secrets, bytes.fromhex(held))
        lean.streams.append(Stream(fd, cap, ctx.log(name), masker, bytes.fromhex(pending)))
    lean.pid, lean.pidfd, lean.deadline = state["pid"], state["pidfd"], state["deadline"]
    lean.started, lean.started_at = state["started"], state["started_at"]
    lean.bells = {name: (bell[0], bell[1], bell[2]) for name, bell in state["bells"].items()}
    lean.children = dict(state["children"])


def resume(args: list[str], memfd: int, signums: list[int]) -> int:
    """Back from the idle wait: the same run, picked up where it parked."""
    state = _read_state(memfd)
    paths = RunPaths(Path(args[0]))
    run = cast("RunRecord", read_json(paths.run_json))
    lean = Lean(paths, run, new_context(paths, run))
    lean.park = park
    _restore(lean, state)
    on_done(lean)
    lean.watch_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if signums:
        lean.signalled(bytes(signums))
    quiet = time.monotonic() - state["last_event"]
    lean.linger = min(LINGER_MAX_S, max(LINGER_MIN_S, 2 * quiet))
    return supervise(lean)


def conclude(lean: Lean, outcome: Outcome | None) -> int:
    """The run's end, exactly as the trio runner's: result, follow-ups, the sweep."""
    import runtime.runs.artifacts  # noqa: F401  (hashlib: before `ended_at`, as trio had it)
    from runtime.delivery.followups import preload

    preload()  # the command has ended: load the delivery path before the result is public
    paths, run, ctx = lean.paths, lean.run, lean.ctx
    if outcome is not None:
        ctx.record_node(run["template"], outcome, 1)
    ctx.close()
    lean.close()
    result = earned(run, ctx, outcome, lean.started, lean.started_at)
    finish(paths, run, result)
    if lean.deliveries is not None:
        lean.deliveries.drain(config.seconds(config.DELIVERY_BUDGET))
    end(paths, run, result)
    return 0 if result["status"] == "done" else 1


def supervise(lean: Lean) -> int:
    """Wait for the command and end the run; a crash still ends it with a result."""
    try:
        outcome = lean.supervise()
    except BaseException as exc:  # the run must still end with a result
        return crashed(lean, exc)
    return conclude(lean, outcome)


def crashed(lean: Lean, exc: BaseException) -> int:
    """The runner itself failed (no descriptor left, say): the run ends `failed` with
    the reason, as under trio, never as a runner gone without a word."""
    result = crash_result(lean.run, exc)
    with contextlib.suppress(Exception):  # what it holds is released at exit anyway
        lean.close()
    finish(lean.paths, lean.run, result)
    end(lean.paths, lean.run, result)
    return 1


def on_done(lean: Lean) -> None:
    """Step follow-ups (runtime.runs.step_followups), delivered on plain threads; their
    modules are imported when the command ends, not while the run starts or idles."""

    def done(record: dict[str, Any]) -> None:
        from runtime.runs.step_followups import ThreadDeliveries, command_done

        deliveries = lean.deliveries = ThreadDeliveries()
        command_done(lean.paths, lean.run, lean.ctx, record, deliveries)

    lean.ctx.on_command_done = done


def start(paths: RunPaths, run: RunRecord) -> int:
    """A lean run from its first instant (the runner has recorded its identity)."""
    ctx = new_context(paths, run)
    lean = Lean(paths, run, ctx)
    lean.park = park
    on_done(lean)
    try:
        outcome = _launch(lean)
    except BaseException as exc:  # the run must still end with a result
        return crashed(lean, exc)
    return supervise(lean) if outcome is None else conclude(lean, outcome)


def _launch(lean: Lean) -> Outcome | None:
    """Listen, then start the command; its outcome when it could not even start."""
    ctx, run = lean.ctx, lean.run
    lean.listen()
    ctx.progress()
    node = run["template"]
    values = {**(node.get("scope_defaults") or {}), **ctx.values, **(node.get("scope") or {})}
    leaf = begin_leaf(ctx, node, node["words"], 1, values)
    if isinstance(leaf, Outcome):
        return leaf
    lean.launch(leaf)
    if lean.pidfd < 0:  # it could not be started
        return end_leaf(ctx, leaf)
    return None

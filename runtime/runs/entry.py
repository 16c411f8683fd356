"""The runner's entry point (`python -P .../runtime/runs/entry.py STATE_DIR`) and the
lean runner's idle wait, which imports nothing of the runtime.

spawn starts this file by path, not with `-m`, so that a parked runner does not even
import the `runtime` package: an idle lean run then costs what a bare interpreter costs
(docs/performance.md, Lean idle runs). Every image of a runner has this same argv, which its
recorded identity holds. ACTORS_RUNNER_STATE says which image this is:

- unset: the first start (runtime.runs.lean_park.first: the lean or the trio runner);
- `wait MEMFD DEADLINE FD,FD,...`: parked; sleep in poll() on those descriptors (and the
  stop signals) until one is ready or the command's deadline passes, then exec() back;
- `resume MEMFD SIGNALS`: woken; the lean runner picks the run up (lean_park.resume).
"""

import os
import sys

STATE = "ACTORS_RUNNER_STATE"
"""runtime.core.config.RUNNER_STATE's name; this file may not import it (it would load
the runtime), and tests/runtime/test_lean_runner.py holds the two equal."""


def _noted(signum: int, frame: object) -> None:
    """A stop signal: its number reaches the wakeup pipe, read after poll() returns."""


def idle(memfd: str, deadline: str, fds: str) -> None:
    """Sleep until something happens, then exec() the woken image (never returns)."""
    import _signal  # type: ignore[import-not-found]  # C module: no signal.py enums
    import select
    import time

    stops = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    _signal.set_wakeup_fd(write)
    for sig in stops:
        _signal.signal(sig, _noted)
    poller = select.poll()
    for fd in [read, *(int(f) for f in fds.split(",") if f)]:
        poller.register(fd, select.POLLIN)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, stops)  # blocked by the parking image
    timeout = None if deadline == "-" else max(0.0, float(deadline) - time.monotonic())
    poller.poll(None if timeout is None else int(timeout * 1000) + 1)
    _signal.pthread_sigmask(_signal.SIG_BLOCK, stops)  # pending ones wait for the next image
    try:
        signums = os.read(read, 64)
    except BlockingIOError:
        signums = b""
    env = dict(os.environ)
    env[STATE] = f"resume {memfd} {','.join(str(s) for s in signums) or '-'}"
    os.execve(sys.executable, sys.orig_argv, env)


def main() -> int:
    state = os.environ.pop(STATE, None)
    if state is not None and state.startswith("wait "):
        idle(*state.split(" ")[1:4])
    # this file's own tree first: the runtime it belongs to, never one found elsewhere
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from runtime.runs import lean_park

    if state is None:
        return lean_park.first(sys.argv[1:])
    _, memfd, signums = state.split(" ")
    signals = [int(s) for s in signums.split(",") if s != "-"]
    return lean_park.resume(sys.argv[1:], int(memfd), signals)


if __name__ == "__main__":
    sys.exit(main())

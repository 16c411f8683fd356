"""The runner's entry point (`python -P .../runtime/runner/entry.py STATE_DIR`) and its
idle wait, which imports nothing of the runtime.

spawn starts this file by path, not with `-m`, so that a parked runner does not even
import the `runtime` package: an idle run then costs what a bare interpreter costs
(docs/performance.md). Every image of a runner has this same argv, which its recorded
identity holds. ACTORS_RUNNER_STATE says which image this is:

- unset: the first start (runtime.runner.park.first);
- `wait STATE DEADLINE FD,FD,... SIG,SIG,...`: parked; sleep in poll() on those
  descriptors (and those signals) until one is ready or the deadline passes, then exec()
  back;
- `resume STATE SIGNALS`: woken; the runner picks the run up (runtime.runner.park.resume).
"""

import os
import sys

STATE = "ACTORS_RUNNER_STATE"
"""runtime.core.config.RUNNER_STATE's name; this file may not import it (it would load
the runtime), and tests/runtime/test_config.py holds the two equal."""
POLL_MAX_MS = 2**31 - 1
"""The longest wait poll(2) takes (runtime.core.config.MAX_SECONDS, in ms): a later
deadline (a recipe's `delay` of a month) is slept in steps; an early wake re-parks."""
LIVENESS_FD = 3
"""runtime.core.platform.LIVENESS_FD: spawn hands the runner its liveness lock there,
already held; the first start keeps it open (tests/runtime/test_config.py holds the two
equal)."""


def _noted(signum: int, frame: object) -> None:
    """A signal: its number reaches the wakeup pipe, read after poll() returns."""


def idle(state: str, deadline: str, fds: str, signums: str) -> None:
    """Sleep until something happens, then exec() the woken image (never returns)."""
    import _signal  # type: ignore[import-not-found]  # C module: no signal.py enums
    import select
    import time

    watched = [int(s) for s in signums.split(",") if s]
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    _signal.set_wakeup_fd(write)
    for sig in watched:
        _signal.signal(sig, _noted)
    poller = select.poll()
    for fd in [read, *(int(f) for f in fds.split(",") if f)]:
        poller.register(fd, select.POLLIN)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, watched)  # blocked by the parking image
    timeout = None if deadline == "-" else max(0.0, float(deadline) - time.monotonic())
    poller.poll(None if timeout is None else min(int(timeout * 1000) + 1, POLL_MAX_MS))
    _signal.pthread_sigmask(_signal.SIG_BLOCK, watched)  # pending ones wait for the next image
    try:
        got = os.read(read, 64)
    except BlockingIOError:
        got = b""
    env = dict(os.environ)
    env[STATE] = f"resume {state} {','.join(str(s) for s in got) or '-'}"
    os.execve(sys.executable, sys.orig_argv, env)


def main() -> int:
    state = os.environ.pop(STATE, None)
    if state is not None and state.startswith("wait "):
        idle(*state.split(" ")[1:5])
    if state is None:  # descriptors a caller of spawn passed down: no command inherits them
        os.closerange(LIVENESS_FD + 1, 1 << 16)  # the lock spawn handed over stays
    # this file's own tree first: the runtime it belongs to, never one found elsewhere
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from runtime.runner import park

    if state is None:
        return park.first(sys.argv[1:])
    _, fd, signums = state.split(" ")
    signals = [int(s) for s in signums.split(",") if s != "-"]
    return park.resume(sys.argv[1:], int(fd), signals)


if __name__ == "__main__":
    sys.exit(main())

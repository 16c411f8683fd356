"""`pi_host`: keep a `pi --mode rpc` process and share its stdio over a Unix socket.

pi's RPC mode is JSONL on the stdin/stdout of a process somebody spawned, so only that
parent can talk to it. Delivery runs in short-lived runner processes, so this host is that
parent: it starts pi once and serves a Unix socket where any number of clients (the `pi`
adapter, a test, a person with `socat`) talk to the same pi session.

    python -m adapters.pi.host --socket ~/.actors-pi/coord.sock [--cwd DIR] -- pi --provider ...

- The relay (adapters/pi/relay.py): client commands go to pi's stdin one line at a
  time, each response back to the client that asked, pi's events to every client, and a
  prompt only once pi answered the previous one; a client that stops reading is dropped
  rather than stall pi.
- The socket's directory is created 0700 when missing (an existing directory is left as
  it is: put the socket in a private one) and the socket is 0600. A stale socket left by
  a dead host is replaced; a live one is an error.
- Lifetime: the host exits with pi's exit status when pi exits; on SIGTERM/SIGINT/SIGHUP it
  stops pi's process group (SIGTERM, SIGKILL after KILL_GRACE_S). By default it also gets
  SIGTERM when its parent (thread) ends (Linux PR_SET_PDEATHSIG), so a test or a
  supervisor never leaks it; `--survive-parent` turns that off for a host started in the
  background from a shell. If the host itself is SIGKILLed, pi sees EOF on stdin and
  shuts down by itself. The socket is removed on exit (only if it is still ours).

Only a pi process started here is reachable. A user's interactive pi TUI has no external
control surface: reaching it needs a pi extension that listens on a socket and calls
`pi.sendUserMessage(text, {deliverAs})` inside the TUI process. That extension is not
built here.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import trio

from adapters.pi.relay import Relay
from runtime.store.writes import ensure_dir

KILL_GRACE_S = 5.0
SUN_PATH_MAX = 107


# -- the socket ------------------------------------------------------------------------
def _prepare_path(path: Path) -> None:
    """Create the private directory; clear a stale socket; refuse a live one."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise SystemExit(
            f"pi_host: socket path {path} is longer than {SUN_PATH_MAX} bytes; use a shorter one"
        )
    if not path.parent.exists():
        ensure_dir(path.parent)  # every missing parent 0700, whatever the umask
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SystemExit(f"pi_host: {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # a dead host's leftover
        return
    finally:
        probe.close()
    raise SystemExit(f"pi_host: another host is serving {path}")


async def _listen(path: Path) -> tuple[trio.SocketListener, tuple[int, int]]:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is born 0600: no window where others may connect
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    st = path.lstat()
    return trio.SocketListener(sock), (st.st_dev, st.st_ino)


def _remove_if_ours(path: Path, identity: tuple[int, int]) -> None:
    with contextlib.suppress(OSError):
        st = path.lstat()
        if (st.st_dev, st.st_ino) == identity:
            path.unlink()


# -- the process -----------------------------------------------------------------------
def _signal_group(process: trio.Process, signum: int) -> None:
    """Signal pi's whole process group (its tool subprocesses too) while pi is alive.

    Only while pi itself is unreaped: the group id is then still pi's pid and cannot name
    anybody else's processes."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)


async def _stop_on_signal(process: trio.Process) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            _signal_group(process, signal.SIGTERM)
            with trio.move_on_after(KILL_GRACE_S):
                await process.wait()
            _signal_group(process, signal.SIGKILL)


async def serve(path: Path, command: list[str], cwd: str | None) -> int:
    """Serve until pi exits; returns pi's exit status (128+N for signal N)."""
    _prepare_path(path)
    listener, identity = await _listen(path)
    try:
        try:
            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=cwd,
                start_new_session=True,  # a group to stop as one; a terminal's ^C goes to us
            )
        except OSError as exc:
            raise SystemExit(f"pi_host: cannot start {command[0]}: {exc}") from None
        assert process.stdin is not None and process.stdout is not None
        host = Relay(process.stdin)
        print(f"pi_host: serving {path} (pi pid {process.pid})", file=sys.stderr, flush=True)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_signal, process)
                nursery.start_soon(trio.serve_listeners, host.serve_client, [listener])
                await host.pump_pi(process.stdout)
                await process.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                _signal_group(process, signal.SIGTERM)
                with trio.move_on_after(KILL_GRACE_S):
                    await process.wait()
                _signal_group(process, signal.SIGKILL)
                await process.wait()
    finally:
        _remove_if_ours(path, identity)
        with trio.CancelScope(shield=True):
            await listener.aclose()
    code = process.returncode
    assert code is not None
    return 128 - code if code < 0 else code


def _exit_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent ends (a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG


def _rpc_command(command: list[str]) -> list[str]:
    """The pi command, with `--mode rpc` added unless given (any other mode is refused)."""
    for index, arg in enumerate(command):
        if arg == "--mode" or arg.startswith("--mode="):
            mode = arg.partition("=")[2] or (command[index + 1] if index + 1 < len(command) else "")
            if mode != "rpc":
                raise SystemExit(f"pi_host: pi must run with --mode rpc, not {mode!r}")
            return command
    return [*command, "--mode", "rpc"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="actors-pi-host",
        description="Start `pi --mode rpc` and share its JSONL stdio on a Unix socket.",
    )
    parser.add_argument("--socket", required=True, type=Path, help="the socket to serve")
    parser.add_argument("--cwd", help="pi's working directory (default: this one)")
    parser.add_argument(
        "--survive-parent",
        action="store_true",
        help="keep running when the process that started the host ends",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- pi [args...]")
    args = parser.parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("give the pi command after --, e.g. -- pi --provider NAME --model ID")
    if not args.survive_parent:
        _exit_with_parent()
    path = Path(os.path.abspath(args.socket))
    if os.sep in command[0]:  # relative to here, not to --cwd
        command[0] = os.path.abspath(command[0])
    return trio.run(serve, path, _rpc_command(command), args.cwd)


if __name__ == "__main__":
    raise SystemExit(main())

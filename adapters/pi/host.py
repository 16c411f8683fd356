"""`pi_host`: keep a `pi --mode rpc` process and share its stdio over a Unix socket.

pi's RPC mode is JSONL on the stdin/stdout of a process somebody spawned, so only that
parent can talk to it. Delivery runs in short-lived runner processes, so this host is that
parent: it starts pi once and serves a Unix socket where any number of clients (the `pi`
adapter, a test, a person with `socat`) talk to the same pi session.

    python -m adapters.pi.host --socket ~/.actors-pi/coord.sock [--cwd DIR] -- pi --provider ...

- Commands: each client writes JSONL; every line is relayed to pi's stdin whole (one
  writer at a time, so two clients' lines never interleave). Its `id` is replaced by a
  host-unique one (`c<connection>.<n>`) and restored on pi's response, which goes only to
  the client that sent the command (a command without an id gets its response too, still
  without one). `extension_ui_response` lines keep their id: it is pi's own.
- Events (pi lines without a routed id) go to every connected client. A new client first
  gets the last `queue_update` pi emitted (if any), so it can see which steer / follow-up
  texts are still waiting in pi's memory; that is how the adapter avoids queueing a
  retried delivery twice.
- Framing is strict JSONL: pi's output is split on "\\n" only (U+2028 is legal inside
  JSON strings), a trailing "\\r" from a client is dropped, and a client line that is not
  a JSON object is answered with an error response instead of reaching pi.
- Prompts pass one at a time: a `prompt` is held until pi has answered the previous
  one (see `_Host._close_gate`: without this, two prompts sent to an idle pi at the same
  moment are both answered success and one of them silently vanishes).
- A client that stops reading is disconnected once CLIENT_BUFFER_LINES lines wait for it,
  so a stuck client can never stall pi's stdout (and with it the agent).
- A client that half-closes (EOF) still gets the responses it is owed, then is closed,
  so `printf '{"type":"get_state"}\\n' | socat - UNIX-CONNECT:PATH` works.
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
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

CLIENT_BUFFER_LINES = 10_000
MAX_CLIENT_LINE_BYTES = 64 * 1024 * 1024
"""A client line longer than this (no newline yet) is refused: one client must not exhaust
the host's memory. Large enough for images sent as base64."""
KILL_GRACE_S = 5.0
PROMPT_GATE_S = 30.0
"""Longest a prompt waits for pi's answer to the previous one (pi answers after its
preflight, which may include compacting the context)."""
SUN_PATH_MAX = 107
_NO_ID = object()
"""Route marker: the client sent its command without an id, so the response has none."""


class _Lines:
    """Split a byte stream into records on b"\\n" only (never on U+2028 / U+2029)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        self._buffer += data
        lines: list[bytes] = []
        while (cut := self._buffer.find(b"\n", self._scanned)) >= 0:
            lines.append(bytes(self._buffer[:cut]))
            del self._buffer[: cut + 1]
            self._scanned = 0
        self._scanned = len(self._buffer)  # a long line is scanned once, not per chunk
        return lines

    @property
    def pending(self) -> int:
        return len(self._buffer)


@dataclass(eq=False)
class _Client:
    number: int
    outbox: trio.MemorySendChannel[bytes]
    connection: trio.CancelScope = field(default_factory=trio.CancelScope)
    outstanding: int = 0
    eof: bool = False
    closed: bool = False

    def put(self, data: bytes) -> None:
        """Queue a line for this client; drop the client rather than block pi's output."""
        if self.closed:
            return
        try:
            self.outbox.send_nowait(data)
        except trio.WouldBlock:
            print(f"pi_host: client {self.number} stopped reading; dropped", file=sys.stderr)
            self.close()
            self.connection.cancel()  # hang up now, without flushing to a stuck reader
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed = True

    def close(self) -> None:
        """Stop taking lines; the writer task flushes what is queued, then hangs up."""
        if not self.closed:
            self.closed = True
            self.outbox.close()


def _dump(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class _Host:
    def __init__(self, stdin: trio.abc.SendStream) -> None:
        self._stdin = stdin
        self._write_lock = trio.Lock()
        self._clients: set[_Client] = set()
        self._routes: dict[str, tuple[_Client, object]] = {}
        self._connections = 0
        self._sequence = 0
        self._last_queue: bytes | None = None
        self._prompt_gate: tuple[str, trio.Event] | None = None

    # -- pi -> clients ---------------------------------------------------------------
    async def pump_pi(self, stdout: trio.abc.ReceiveStream) -> None:
        """Route every pi line until pi closes its stdout."""
        lines = _Lines()
        while data := await stdout.receive_some(1 << 16):
            for line in lines.feed(data):
                self._route(line)

    def _route(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            # not protocol: keep it visible to a person, out of every client's stream
            sys.stderr.buffer.write(b"pi_host: pi stdout (not JSON): " + line[:2000] + b"\n")
            sys.stderr.flush()
            return
        if isinstance(message, dict) and message.get("type") == "response":
            host_id = str(message.get("id"))
            self._open_gate(host_id)
            route = self._routes.pop(host_id, None)
            if route is not None:
                client, original = route
                if original is _NO_ID:
                    message.pop("id", None)
                else:
                    message["id"] = original
                client.outstanding -= 1
                client.put(_dump(message))
                if client.eof and client.outstanding == 0:
                    client.close()
                return
        if isinstance(message, dict) and message.get("type") == "queue_update":
            self._last_queue = line + b"\n"
        for client in list(self._clients):
            client.put(line + b"\n")

    # -- clients -> pi ---------------------------------------------------------------
    async def serve_client(self, stream: trio.SocketStream) -> None:
        self._connections += 1
        outbox, pending = trio.open_memory_channel[bytes](CLIENT_BUFFER_LINES)
        client = _Client(self._connections, outbox)
        self._clients.add(client)
        if self._last_queue is not None:
            client.put(self._last_queue)
        try:
            with client.connection:
                async with trio.open_nursery() as nursery:

                    async def write() -> None:
                        with contextlib.suppress(
                            trio.BrokenResourceError, trio.ClosedResourceError
                        ):
                            async for data in pending:
                                await stream.send_all(data)
                        nursery.cancel_scope.cancel()  # closed, or the peer went away

                    nursery.start_soon(write)
                    await self._read_commands(client, stream)
                    client.eof = True
                    if client.outstanding == 0:
                        client.close()
        finally:
            self._clients.discard(client)
            client.close()
            pending.close()
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async def _read_commands(self, client: _Client, stream: trio.SocketStream) -> None:
        lines = _Lines()
        while True:
            try:
                data = await stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for line in lines.feed(data):
                await self._forward(client, line.removesuffix(b"\r"))
            if lines.pending > MAX_CLIENT_LINE_BYTES:
                client.put(_error("parse", f"line longer than {MAX_CLIENT_LINE_BYTES} bytes"))
                return

    async def _forward(self, client: _Client, line: bytes) -> None:
        if not line.strip():
            return
        try:
            command = json.loads(line)
        except ValueError as exc:
            client.put(_error("parse", f"Failed to parse command: {exc}"))
            return
        if not isinstance(command, dict):
            client.put(_error("parse", "a command must be a JSON object"))
            return
        if command.get("type") != "extension_ui_response":
            self._sequence += 1
            host_id = f"c{client.number}.{self._sequence}"
            if command.get("type") == "prompt":
                await self._close_gate(host_id)
            self._routes[host_id] = (client, command.get("id", _NO_ID))
            command["id"] = host_id
            client.outstanding += 1
        async with self._write_lock:
            await self._stdin.send_all(_dump(command))

    async def _close_gate(self, host_id: str) -> None:
        """Hold a prompt until pi has answered the previous one, then let it through.

        pi checks "is the agent busy?" when a prompt arrives but only becomes busy after
        the prompt's preflight, which awaits; a second prompt arriving in between passes
        the check too, is answered success, and is then dropped without a trace (pi
        0.73.1: its `agent.prompt` throws "already processing" after the success response
        was sent). pi marks itself busy in the same tick in which it writes the response,
        so a prompt sent after that response is queued (with `streamingBehavior`) or
        rejected (without), never lost."""
        while (previous := self._prompt_gate) is not None:
            with trio.move_on_after(PROMPT_GATE_S):
                await previous[1].wait()
            if self._prompt_gate is previous:  # pi never answered it: stop holding everyone
                self._prompt_gate = None
        self._prompt_gate = (host_id, trio.Event())

    def _open_gate(self, host_id: str) -> None:
        if self._prompt_gate is not None and self._prompt_gate[0] == host_id:
            self._prompt_gate[1].set()
            self._prompt_gate = None


def _error(command: str, text: str) -> bytes:
    return _dump({"type": "response", "command": command, "success": False, "error": text})


# -- the socket ------------------------------------------------------------------------
def _prepare_path(path: Path) -> None:
    """Create the private directory; clear a stale socket; refuse a live one."""
    if len(os.fsencode(path)) > SUN_PATH_MAX:
        raise SystemExit(
            f"pi_host: socket path {path} is longer than {SUN_PATH_MAX} bytes; use a shorter one"
        )
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True)
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
        host = _Host(process.stdin)
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
        prog="python -m adapters.pi.host",
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

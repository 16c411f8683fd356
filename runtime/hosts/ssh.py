"""Every ssh command line to a host, in one place: the user's own ssh (config, keys,
agent), host keys checked strictly, and one ControlMaster per host that every call,
the link's channel included, is multiplexed over.

The remote command is one string for the remote shell (that is how ssh sends it), so
each argument is quoted on its own: a value is exactly one argument there too.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from runtime.core import config
from runtime.core.errors import ActorsError, BadInput, ResourceError, StateDamaged
from runtime.core.terminal import one_line
from runtime.store.layout import HostPaths

SSH_FAILED = 255
"""ssh's own exit status for a connection that failed (the remote command's otherwise)."""

CONTROL_PERSIST = "10m"
"""How long the master outlives its last channel (the link's channel keeps it while runs
are out there)."""

CONNECT_TIMEOUT_S = 10
"""A host that does not answer is unreachable after this long (not TCP's two minutes)."""

MAX_SOCKET_PATH = 100
"""A unix socket's path is at most 108 bytes (sun_path); ssh adds a suffix while binding."""


class HostUnreachable(ActorsError):
    """ssh could not connect or log in (not a fault of the remote command)."""

    exit_code = 3


class HostAnswer(ActorsError):
    """The host's actors answered what this version cannot read: output that is not its
    JSON (a different or a hostile actors there)."""


def no_ssh() -> ResourceError:
    """The one line for an `ssh` that is not on PATH (every start of ssh raises it)."""
    return ResourceError("ssh is not installed", hint="install OpenSSH's client")


def ssh_argv(paths: HostPaths, user: str, address: str, port: int) -> list[str]:
    """The ssh command line up to the remote command."""
    socket = str(paths.control_socket)
    if len(socket) > MAX_SOCKET_PATH:
        raise BadInput(
            f"the host's connection socket path {socket[:60]}... is longer than "
            f"{MAX_SOCKET_PATH} bytes",
            hint="point ACTORS_HOME at a shorter path",
        )
    _check_socket(paths.control_socket)
    argv = ["ssh"]
    if cfg := config.path(config.SSH_CONFIG):
        argv += ["-F", cfg]
    argv += [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", "ControlMaster=auto",
        "-o", f"ControlPath={socket}",
        "-o", f"ControlPersist={CONTROL_PERSIST}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-p", str(port),
    ]  # fmt: skip
    if user:
        argv += ["-l", user]
    return [*argv, "--", address]


def _check_socket(path: Path) -> None:
    """ssh connects to an existing ControlPath as the host's master and sends it every
    command: a symlink planted there (or anything but this user's socket) would take the
    host's commands somewhere else, so it is refused, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # no master yet: ssh binds a fresh one (it unlinks nothing it did not make)
    if stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid():
        return
    what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a socket of yours"
    raise StateDamaged(
        f"{path} is {what}; refusing to hand it to ssh as the host's connection",
        hint=f"remove it (rm {path}); the next command makes the connection again",
        path=path,
    )


def remote_command(actors: str, args: Sequence[str]) -> str:
    """`actors ARGS...` as the host's login shell must read it (posix_command)."""
    return posix_command([actors, *args])


def posix_command(argv: Sequence[str]) -> str:
    """`argv` as one ssh command string that every login shell reads the same. ssh hands
    the string to the user's shell there, and sh, fish and csh read quoting differently
    (a backslash or a newline inside '...'), so the POSIX-quoted command travels base64
    encoded in a frame of characters all of them read literally, and sh runs it: each
    value is still exactly one argument, whatever the host's shell."""
    import base64

    encoded = base64.b64encode(shlex.join(argv).encode()).decode()
    return f"""sh -c 'eval "exec $(echo {encoded} | base64 -d)"'"""


def explain(name: str, address: str, port: int, stderr: str) -> ActorsError:
    """ssh's failure as one line with its fix."""
    spec = address if port == 22 else f"[{address}]:{port}"
    if "IDENTIFICATION HAS CHANGED" in stderr:
        return HostUnreachable(
            f"host {name}: the key {spec} presents is not the one in known_hosts "
            "(refused: it may be an attacker)",
            hint=f"if {spec} was really reinstalled, check its new key out of band, then "
            f"`ssh-keygen -R '{spec}'` and connect once with ssh to record the new key",
        )
    if "Host key verification failed" in stderr or "No ED25519 host key is known" in stderr:
        return HostUnreachable(
            f"host {name}: {spec}'s key is not in known_hosts",
            hint=f"check its fingerprint, then record it: ssh -p {port} {address} true "
            "(answer yes), or add it to known_hosts yourself",
        )
    lines = [line for line in stderr.splitlines() if line.strip() and "Warning:" not in line]
    why = one_line(lines[-1], 200) if lines else "ssh failed"
    return HostUnreachable(
        f"host {name} ({spec}) cannot be reached: {why}",
        hint="check `ssh -p PORT [user@]host true` works without a password prompt",
    )


MAX_OUTPUT = 4 << 20
"""The most a host's answer to one command may print (a `result --json` is the largest,
and is read to at most this): past it the channel is cut and the answer refused, so a
hostile or broken actors there cannot fill this process's memory."""


def run_remote(
    argv: list[str],
    *,
    name: str,
    address: str,
    port: int,
    input: str | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """One remote command over the host's connection, its output captured (at most
    MAX_OUTPUT, its stderr's last MAX_OUTPUT); ssh's own failure raised as
    HostUnreachable, and so is an answer that does not end within `timeout` (the remote
    command's status is the caller's). Bytes that are not UTF-8 (a hostile actors, a
    login banner) read as U+FFFD: what the host prints is never a reason for a traceback
    here (callers escape what they show)."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise no_ssh() from exc
    with proc:
        try:
            out, err, fault = _exchange(proc, (input or "").encode(), timeout)
        except BaseException:  # interrupted here (Ctrl-C): the channel goes with it
            proc.kill()
            raise
        if fault is not None:
            proc.kill()
        proc.wait()
    if fault == "timeout":
        raise HostUnreachable(f"host {name} did not answer within {timeout:.0f}s")
    if fault is not None:
        raise HostAnswer(
            f"host {name}'s actors answered with more than {MAX_OUTPUT} bytes",
            hint="check the actors there (`actors host ls`)",
        )
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if proc.returncode == SSH_FAILED:
        raise explain(name, address, port, stderr)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _exchange(
    proc: subprocess.Popen[bytes], data: bytes, timeout: float
) -> tuple[bytes, bytes, str | None]:
    """`data` written to the command's stdin while its stdout and stderr are read, until
    both end: (stdout, stderr's tail, None), or the fault that stopped it first
    (`timeout`, `too-large`). One thread and a selector, as subprocess's own
    communicate, but bounded in time and size."""
    import selectors
    import time

    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        assert proc.stdout is not None and proc.stderr is not None
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        sent = 0
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), bytes(err), "timeout"
            for key, _ in selector.select(left):
                if key.data is None:  # stdin: the next part of `data`, then its end
                    try:
                        sent += os.write(key.fd, data[sent : sent + 65536])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        sent = len(data)
                    if sent >= len(data):
                        selector.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if key.data is out and len(out) > MAX_OUTPUT:
                    return bytes(out), bytes(err), "too-large"
                del err[:-MAX_OUTPUT]
    return bytes(out), bytes(err), None


def close_master(argv: list[str]) -> None:
    """`ssh -O exit`: the host's master connection ends (host rm, a failed host add).
    Best effort: a master that does not answer within 10 s (stuck, stopped) is left to
    its keepalives, never a traceback of the command that is done with it."""
    import contextlib

    control = [*argv[:-2], "-O", "exit", *argv[-2:]]
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(
            control, capture_output=True, check=False, timeout=10, stdin=subprocess.DEVNULL
        )

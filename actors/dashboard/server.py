"""`actors dashboard`: bind, print the tokened URL, serve until Ctrl-C.

Served by hypercorn's trio worker: the runtime is trio already (the runner, the
guardians, the MCP server), hypercorn parses HTTP/1.1 with h11 and streams ASGI
responses (the server-sent events), so the dashboard writes no HTTP parsing of its own.

Loopback only unless told: a host that is not a loopback address is refused (exit 2)
without `--allow-remote`, because the page can kill runs and the token travels in
clear HTTP. The socket is bound here, before hypercorn starts, so `--port 0` picks a
free port and the printed URL names it.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import sys
from typing import Any

import trio

from actors.dashboard.auth import LOOPBACK_NAMES, Gate, new_token
from runtime.core.errors import ActorsError, BadInput
from runtime.runs.ownership import Principal

GRACE_S = 1.0
"""How long open pages' streams get to close once Ctrl-C is pressed."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, allow_remote: bool) -> None:
    if not is_loopback(host) and not allow_remote:
        raise BadInput(
            f"--host {host} is not a loopback address; the dashboard can kill runs",
            hint="bind 127.0.0.1 (the default), or pass --allow-remote to serve other machines",
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on host:port (port 0: a free one)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadInput(f"--host {host}: {exc.strerror}", hint="e.g. --host 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise BadInput(
            f"cannot listen on {host}:{port}: {exc.strerror}", hint="try --port 0 (a free port)"
        ) from None
    return sock


def url_host(host: str, family: int) -> str:
    return f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host


def serve(host: str, port: int, *, allow_remote: bool, session: str | None) -> None:
    """Bind, print the URL (one line on stdout), serve until SIGINT or SIGTERM."""
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot

    check_host(host, allow_remote)
    root = StateRoot.from_env()
    principal = current_principal(root, session)
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    shown = url_host(host, sock.family)
    names = {shown, *LOOPBACK_NAMES} if is_loopback(host) else {shown}
    gate = Gate(new_token(), bound, names, any_host=allow_remote and not is_loopback(host))
    url = f"http://{shown}:{bound}/?token={gate.token}"
    try:
        trio.run(_serve, root, sock, gate, principal, url)
    except BaseExceptionGroup as group:  # trio's nurseries group what their tasks raise
        raise _user_error(group) or group from None


def _user_error(group: BaseExceptionGroup) -> ActorsError | None:
    """The one user-fixable error a start failed with (an untrusted run directory, no
    inotify instance or descriptor left), so the CLI prints its line and exits 2 instead
    of reporting a bug."""
    from runtime.core.errors import resource_error

    errors = [e for e in _leaves(group) if not isinstance(e, trio.Cancelled)]
    if len(errors) != 1:
        return None
    if isinstance(errors[0], ActorsError):
        return errors[0]
    return resource_error(errors[0])


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def _serve(
    root: object, sock: socket.socket, gate: Gate, principal: Principal, url: str
) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    from actors.dashboard.app import Dashboard
    from actors.dashboard.live import Hub
    from runtime.store.layout import StateRoot

    assert isinstance(root, StateRoot)
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]  # hypercorn's socket now, closed by it alone
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = GRACE_S
    hub = Hub(root)
    stopping = trio.Event()

    async def on_signal() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                stopping.set()
                return

    served = trio.Event()

    async def server(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await hypercorn_serve(
                app, config, shutdown_trigger=stopping.wait, task_status=task_status
            )
        finally:
            served.set()

    app: Any = Dashboard(hub, gate, principal)  # an ASGI callable; hypercorn's types are narrower
    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal)
        await nursery.start(hub.watch)
        await nursery.start(server)
        sys.stdout.write(f"{url}\n")
        sys.stdout.flush()
        sys.stderr.write(f"actors dashboard: acting as {principal.id}; Ctrl-C stops it\n")
        await stopping.wait()
        hub.stop()  # open pages' streams end, so hypercorn's graceful stop need not wait
        await served.wait()
        nursery.cancel_scope.cancel()  # the watcher
    sys.stderr.write("actors dashboard: stopped\n")

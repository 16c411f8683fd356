"""The dashboard's ASGI application: the gate, then one route per path.

A hand-written router over a dozen fixed paths: a framework would add a dependency and
an import cost to route what a table does. Every request passes the gate first (Host,
token; an action also the CSRF header), so no route can forget it. A user-fixable
failure (`ActorsError`) is answered as JSON with its one line and hint, with the status
its kind means; the machine running out of something (a full disk, no descriptor left)
is a 503 with its line, and the server keeps serving; anything else is a bug, logged by
hypercorn as a 500.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from actors.dashboard import actions, api
from actors.dashboard.asgi import (
    BodyTooLarge,
    Receive,
    Request,
    Scope,
    Send,
    redirect,
    respond,
    send_error,
)
from actors.dashboard.auth import Gate, headers_of
from actors.dashboard.live import Hub
from runtime.core.errors import (
    ActorsError,
    BadInput,
    Conflict,
    NotFound,
    Refused,
    ResourceError,
    StateDamaged,
    resource_error,
)
from runtime.runs.ownership import Principal

STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "index.html": "text/html; charset=utf-8",
}
_RUN = r"(?P<run>[A-Za-z0-9][A-Za-z0-9._-]{0,127})"
_HOST = r"(?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,127})"
Handler = Callable[..., Awaitable[None]]
ROUTES: list[tuple[str, re.Pattern[str], Handler, dict[str, Any]]] = [
    ("GET", re.compile(r"/api/runs"), api.runs_page, {}),
    ("GET", re.compile(rf"/api/runs/{_RUN}"), api.run_detail, {}),
    ("GET", re.compile(rf"/api/runs/{_RUN}/commands/(?P<command>[^/]+)"), api.command_detail, {}),
    ("GET", re.compile(rf"/api/rooms/{_RUN}"), api.room_detail, {}),
    ("GET", re.compile(r"/api/sessions"), api.sessions, {}),
    ("POST", re.compile(rf"/api/runs/{_RUN}/kill"), actions.stop, {"action": "kill"}),
    ("POST", re.compile(rf"/api/runs/{_RUN}/cancel"), actions.stop, {"action": "cancel"}),
    ("POST", re.compile(r"/api/message"), actions.message, {}),
    ("GET", re.compile(rf"/api/hosts/{_HOST}/runs/{_RUN}"), api.remote_detail, {}),
    (
        "POST",
        re.compile(rf"/api/hosts/{_HOST}/runs/{_RUN}/kill"),
        actions.stop_remote,
        {"action": "kill"},
    ),
    (
        "POST",
        re.compile(rf"/api/hosts/{_HOST}/runs/{_RUN}/cancel"),
        actions.stop_remote,
        {"action": "cancel"},
    ),
]
_STATUS = {
    BadInput: 400,
    NotFound: 404,
    Conflict: 409,
    Refused: 403,
    StateDamaged: 409,
    ResourceError: 503,
}
"""An ActorsError's HTTP status. A run whose files are damaged is answered 409 naming the
file, as the CLI refuses it; ResourceError (a full disk, no descriptor left) is 503: the
server goes on, and the same request works once the machine has room again."""
FORBIDDEN = "forbidden: open the URL `actors dashboard` printed (it carries the token)"


def _asset(name: str) -> bytes:
    return resources.files("actors.dashboard").joinpath("static", name).read_bytes()


class Dashboard:
    """The ASGI callable hypercorn serves."""

    def __init__(self, hub: Hub, gate: Gate, principal: Principal) -> None:
        self.hub = hub
        self.gate = gate
        self.principal = principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return  # no websockets here
        headers = headers_of(dict(scope))
        request = Request.of(scope, headers, receive, send)
        request.extra.update(principal=self.principal.id, principal_record=self.principal)
        if not self.gate.host_ok(headers):
            await respond(send, 403, b"forbidden: unknown Host", "text/plain; charset=utf-8")
            return
        if not self.gate.admitted(dict(scope), headers):
            await respond(send, 403, FORBIDDEN.encode(), "text/plain; charset=utf-8")
            return
        try:
            await self._route(request, scope)
        except ActorsError as exc:
            status = next((s for kind, s in _STATUS.items() if isinstance(exc, kind)), 500)
            await send_error(send, status, exc.message, hint=exc.hint)
        except BodyTooLarge:
            await send_error(send, 413, "the request body is too large")
        except (OSError, MemoryError) as exc:  # the machine ran out of something: say so
            found = resource_error(exc, where=str(self.hub.root.path))
            if found is None:
                raise
            await send_error(send, 503, found.message, hint=found.hint)

    async def _route(self, request: Request, scope: Scope) -> None:
        path, method = request.path, request.method
        if method == "GET" and path == "/":
            if self.gate.query_token(dict(scope)) is not None:  # first visit: keep it in a cookie
                cookie = [(b"set-cookie", self.gate.set_cookie().encode())]
                await redirect(request.send, "/", cookie)
                return
            await respond(request.send, 200, _asset("index.html"), STATIC["index.html"])
            return
        if method == "GET" and path.startswith("/static/") and path[8:] in STATIC:
            await respond(request.send, 200, _asset(path[8:]), STATIC[path[8:]])
            return
        if method == "GET" and path == "/favicon.ico":
            await respond(request.send, 204, b"", "image/x-icon")
            return
        if method == "GET" and path == "/events":
            await self.hub.stream(request)
            return
        if method == "GET" and path == "/metrics":
            await _metrics(request, self.hub)
            return
        for verb, pattern, handler, kwargs in ROUTES:
            found = pattern.fullmatch(path)
            if found is None:
                continue
            if verb != method:
                await send_error(request.send, 405, f"{path} takes {verb}")
                return
            if verb == "POST" and not self.gate.action_ok(request.headers):
                await send_error(request.send, 403, "forbidden: an action must come from the page")
                return
            await handler(request, self.hub, *found.groupdict().values(), **kwargs)
            return
        await send_error(request.send, 404, f"no page {path}")


async def _metrics(request: Request, hub: Hub) -> None:
    """`/metrics` in the Prometheus text format (actors.dashboard.metrics), rendered in a
    worker thread: a first scrape of 10,000 runs takes about a second."""
    import trio

    from actors.dashboard.metrics import CONTENT_TYPE, render_metrics

    text: str = await trio.to_thread.run_sync(render_metrics, hub.root)
    await respond(request.send, 200, text.encode(), CONTENT_TYPE)

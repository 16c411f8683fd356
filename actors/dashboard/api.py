"""The dashboard's reads: the runtime's read models as JSON, one route each.

The runs page is cut from the hub's board (memory); a run, a room and the sessions are
read from their files per request, in a worker thread so a slow disk never stalls the
server's other pages. Every route answers what the CLI would: the same readers, the same
secret masking, a bad input as `{"error": ..., "hint": ...}` with 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from actors.dashboard.asgi import Request, send_json
from actors.dashboard.live import Hub
from runtime.core.errors import BadInput
from runtime.views.listing import PER_PAGE, RunFilter, page_of, units
from runtime.views.status import ACTIVE


def _int(query: dict[str, str], key: str, default: int) -> int:
    value = query.get(key, "")
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise BadInput(
            f"{key}={value[:20]!r} is not a whole number", hint=f"e.g. {key}=1"
        ) from None


async def runs_page(request: Request, hub: Hub) -> None:
    q = request.query
    flt = RunFilter(
        status=q.get("status", ""),
        session=q.get("session", ""),
        text=q.get("q", ""),
        page=_int(q, "page", 1),
        per=_int(q, "per", PER_PAGE),
    )
    runs: list[Mapping[str, Any]] = list(hub.board.runs())
    if hub.root.hosts.is_dir():  # runs placed on hosts, with their host (as `ls`)
        from runtime.hosts.remote import placed_rows

        placed = await trio.to_thread.run_sync(placed_rows, hub.root)
        runs = sorted([*placed, *runs], key=lambda r: str(r.get("created_at") or ""), reverse=True)
    page: dict[str, Any] = dict(page_of(runs, flt))
    me = request.extra["principal"]
    page["version"] = hub.board.version
    page["me"] = me
    page["my_units"] = sum(
        units(r) for r in runs if r.get("owner_id") == me and r.get("status") in ACTIVE
    )
    page["sessions"] = sorted({str(r.get("owner_id") or "-") for r in runs})
    await send_json(request.send, page)


async def run_detail(request: Request, hub: Hub, run_id: str) -> None:
    from runtime.views.run_page import run_page

    page: dict[str, Any] = dict(await trio.to_thread.run_sync(run_page, hub.root, run_id))
    page["children"] = [
        {k: c.get(k) for k in ("run", "status", "recipe", "tool", "command", "created_at")}
        for c in hub.board.children(run_id)
    ]
    page["me"] = request.extra["principal"]
    await send_json(request.send, page)


async def remote_detail(request: Request, hub: Hub, host: str, run_id: str) -> None:
    """A run on a host, as its host answers `status` (and `result` once it ended)."""
    from runtime.hosts.verbs import remote_json
    from runtime.views.status import TERMINAL

    address, me = f"run:{host}/{run_id}", request.extra["principal"]
    principal = request.extra["principal_record"]

    def read() -> dict[str, Any]:
        status = remote_json(hub.root, address, "status", principal=principal)
        ended = status.get("status") in TERMINAL
        result = remote_json(hub.root, address, "result", principal=principal) if ended else None
        return {"address": address, "host": host, "status": status, "result": result, "me": me}

    await send_json(request.send, await trio.to_thread.run_sync(read))


async def command_detail(request: Request, hub: Hub, run_id: str, command_id: str) -> None:
    from runtime.views.run_page import command_output

    found = await trio.to_thread.run_sync(command_output, hub.root, run_id, command_id)
    await send_json(request.send, dict(found))


async def room_detail(request: Request, hub: Hub, run_id: str) -> None:
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.views.room_board import room_board
    from runtime.views.status import TERMINAL, find_run, full_status

    def read() -> dict[str, Any]:
        paths, run = find_run(hub.root, run_id)
        status = full_status(paths, run)
        ended = status["status"] in TERMINAL
        board: dict[str, Any] = dict(room_board(hub.root, run_id, ended=ended))
        board["status"] = redact_deep(dict(status), run_secrets(run))
        return board

    await send_json(request.send, await trio.to_thread.run_sync(read))


async def sessions(request: Request, hub: Hub) -> None:
    from runtime.views.observed import sessions_view

    views = await trio.to_thread.run_sync(sessions_view, hub.root)
    await send_json(request.send, {"sessions": views, "me": request.extra["principal"]})

"""The dashboard's actions: cancel, kill and message, as the CLI takes them.

The same runtime functions `actors cancel`, `actors kill` and `actors message` call
(runtime.runs.control, runtime.routing.router.send), under the same principal: the
session the dashboard was started as (`--session`, else $ACTORS_SESSION, else the
user). Another session's run is refused as the CLI refuses it; the page then asks a
second time and, if the operator confirms, sends `force` (the CLI's `--force`). The
ownership check is the CLI's own (`check_control`), run first only to tell the page that
a second confirmation would help, rather than a plain error.
"""

from __future__ import annotations

from typing import Any

import trio

from actors.dashboard.asgi import Request, send_error, send_json
from actors.dashboard.live import Hub
from runtime.core.bounded_json import decode_input
from runtime.core.errors import BadInput, Refused
from runtime.hosts.address import is_remote
from runtime.runs.ownership import Principal, check_control
from runtime.views.status import find_run


def _payload(raw: bytes) -> dict[str, Any]:
    data = decode_input(raw or b"{}", "the action's body")
    if not isinstance(data, dict):
        raise BadInput("the action's body is not a JSON object")
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise BadInput("force must be true or false")
    return data


def _owned_elsewhere(hub: Hub, run_id: str, principal: Principal, action: str) -> str | None:
    """The owner of `run_id` when `principal` may not `action` it without force."""
    _paths, run = find_run(hub.root, run_id)
    try:
        check_control(run, principal, force=False, action=action, root=hub.root)
    except Refused:
        return str(run.get("owner_id"))
    return None


async def stop(request: Request, hub: Hub, run_id: str, action: str) -> None:
    """POST /api/runs/<id>/kill|cancel {"force": bool, "grace": seconds (cancel)}."""
    from runtime.runs.control import CANCEL_GRACE_S, cancel, kill

    data = _payload(await request.body())
    principal: Principal = request.extra["principal_record"]
    force = bool(data.get("force"))
    grace = data.get("grace", CANCEL_GRACE_S)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= 3600:
        raise BadInput("grace must be a number of seconds from 0 to 3600")

    def act() -> Any:
        if not force:
            owner = _owned_elsewhere(hub, run_id, principal, action)
            if owner is not None:
                return owner
        if action == "kill":
            return kill(hub.root, run_id, principal, force=force)
        return cancel(hub.root, run_id, principal, force=force, grace=float(grace))

    outcome = await trio.to_thread.run_sync(act)
    if isinstance(outcome, str):
        await _needs_force(request, run_id, outcome, principal, action)
        return
    await send_json(request.send, {"ok": True, "run": run_id, "status": outcome.get("status")})


async def stop_remote(request: Request, hub: Hub, host: str, run_id: str, action: str) -> None:
    """POST /api/hosts/<host>/runs/<id>/kill|cancel {"force": bool}: the host's own kill
    or cancel of a run placed there from here (runtime.hosts.verbs), the placing
    session's unless forced."""
    from runtime.hosts.records import placement
    from runtime.hosts.verbs import remote_json
    from runtime.runs.ownership import acts_for

    data = _payload(await request.body())
    principal: Principal = request.extra["principal_record"]
    force = bool(data.get("force"))
    address = f"run:{host}/{run_id}"

    def act() -> Any:
        placed = placement(hub.root, host, run_id)
        if (
            not force
            and placed is not None
            and not acts_for(hub.root, principal.id, placed["session"])
        ):
            return placed["session"]
        return remote_json(hub.root, address, action, principal=principal.id, force=force)

    outcome = await trio.to_thread.run_sync(act)
    if isinstance(outcome, str):
        await _needs_force(request, address, outcome, principal, action)
        return
    await send_json(request.send, {"ok": True, "run": address, "status": outcome.get("status")})


async def message(request: Request, hub: Hub) -> None:
    """POST /api/message {"to", "type", "body", "force"}: `actors message` (JSON body,
    or text sent as a string, as `actors message` takes a body that is not JSON)."""
    from runtime.messaging.addresses import parse_address
    from runtime.routing.router import full_address, send

    data = _payload(await request.body())
    to, kind = data.get("to"), data.get("type")
    if not isinstance(to, str) or not isinstance(kind, str) or not to or not kind:
        raise BadInput("a message needs `to` and `type`", hint='e.g. {"to": "run:x", "type": "t"}')
    principal: Principal = request.extra["principal_record"]
    force = bool(data.get("force"))

    def act() -> Any:
        if is_remote(to):  # a run on a host: sent there
            return _message_remote(hub, to, kind, data.get("body"), principal, force)
        address = parse_address(full_address(to))
        if not force and address.kind in ("run", "room", "branch") and address.target:
            owner = _owned_elsewhere(hub, address.target, principal, "message")
            if owner is not None:
                return owner
        return send(hub.root, to, kind, data.get("body"), principal, force=force)

    outcome = await trio.to_thread.run_sync(act)
    if isinstance(outcome, str):
        await _needs_force(request, to, outcome, principal, "message")
        return
    await send_json(request.send, {"ok": True, **outcome})


def _message_remote(
    hub: Hub, to: str, kind: str, body: Any, principal: Principal, force: bool
) -> Any:
    """A message to `run:<host>/<id>`: the placing session's owner answer (the page then
    asks to force it), or the host's answer."""
    from runtime.hosts.records import placement
    from runtime.hosts.remote import remote_ref
    from runtime.hosts.verbs import remote_message
    from runtime.runs.ownership import acts_for

    ref = remote_ref(to)
    placed = placement(hub.root, ref.host, ref.run) if ref is not None else None
    if not force and placed is not None and not acts_for(hub.root, principal.id, placed["session"]):
        return placed["session"]
    sent = remote_message(hub.root, to, kind, body, principal=principal.id, force=force)
    return {"id": sent.get("id"), "state": sent.get("state") or sent.get("status"), **sent}


async def _needs_force(
    request: Request, target: str, owner: str, principal: Principal, action: str
) -> None:
    await send_error(
        request.send,
        409,
        f"{target} belongs to {owner}, not {principal.id}",
        hint=f"confirm again to {action} it anyway (the CLI's --force)",
        needs_force=True,
        owner=owner,
    )

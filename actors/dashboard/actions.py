"""The dashboard's actions: cancel, kill and message, as the CLI takes them.

The same runtime functions `actors cancel`, `actors kill` and `actors message` call
(runtime.runs.control, runtime.routing.router.send), under the same principal: the
session the dashboard was started as (`--session`, else $ACTORS_SESSION, else the
user). Another session's run is refused as the CLI refuses it, by the one ownership
check of every run, local or on a host (runtime.runs.ownership); its refusal (NotOwner)
becomes the page's question instead of a plain error: asked a second time, and if the
operator confirms, the action is sent with `force` (the CLI's `--force`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from actors.dashboard.asgi import Request, send_error, send_json
from actors.dashboard.live import Hub
from runtime.core.bounded_json import decode_input
from runtime.core.errors import BadInput
from runtime.hosts.address import is_remote
from runtime.runs.ownership import NotOwner, Principal


def _payload(raw: bytes) -> dict[str, Any]:
    data = decode_input(raw or b"{}", "the action's body")
    if not isinstance(data, dict):
        raise BadInput("the action's body is not a JSON object")
    force = data.get("force", False)
    if not isinstance(force, bool):
        raise BadInput("force must be true or false")
    return data


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
        if action == "kill":
            return kill(hub.root, run_id, principal, force=force)
        return cancel(hub.root, run_id, principal, force=force, grace=float(grace))

    outcome = await _asking_force(request, run_id, principal, action, act)
    if outcome is not None:
        await send_json(request.send, {"ok": True, "run": run_id, "status": outcome.get("status")})


async def stop_remote(request: Request, hub: Hub, host: str, run_id: str, action: str) -> None:
    """POST /api/hosts/<host>/runs/<id>/kill|cancel {"force": bool}: the host's own kill
    or cancel of a run placed there from here (runtime.hosts.verbs), the placing
    session's unless forced."""
    from runtime.hosts.verbs import remote_json

    data = _payload(await request.body())
    principal: Principal = request.extra["principal_record"]
    force = bool(data.get("force"))
    address = f"run:{host}/{run_id}"

    def act() -> Any:
        return remote_json(hub.root, address, action, principal=principal, force=force)

    outcome = await _asking_force(request, address, principal, action, act)
    if outcome is not None:
        await send_json(request.send, {"ok": True, "run": address, "status": outcome.get("status")})


async def message(request: Request, hub: Hub) -> None:
    """POST /api/message {"to", "type", "body", "force"}: `actors message` (JSON body,
    or text sent as a string, as `actors message` takes a body that is not JSON)."""
    from runtime.routing.router import send

    data = _payload(await request.body())
    to, kind = data.get("to"), data.get("type")
    if not isinstance(to, str) or not isinstance(kind, str) or not to or not kind:
        raise BadInput("a message needs `to` and `type`", hint='e.g. {"to": "run:x", "type": "t"}')
    principal: Principal = request.extra["principal_record"]
    force = bool(data.get("force"))

    def act() -> Any:
        if is_remote(to):  # a run on a host: sent there
            return _message_remote(hub, to, kind, data.get("body"), principal, force)
        return send(hub.root, to, kind, data.get("body"), principal, force=force)

    outcome = await _asking_force(request, to, principal, "message", act)
    if outcome is not None:
        await send_json(request.send, {"ok": True, **outcome})


def _message_remote(
    hub: Hub, to: str, kind: str, body: Any, principal: Principal, force: bool
) -> Any:
    """A message to `run:<host>/<id>`: the host's answer."""
    from runtime.hosts.verbs import remote_message

    sent = remote_message(hub.root, to, kind, body, principal=principal, force=force)
    return {"id": sent.get("id"), "state": sent.get("state") or sent.get("status"), **sent}


async def _asking_force(
    request: Request, target: str, principal: Principal, action: str, act: Callable[[], Any]
) -> Any:
    """`act()`'s outcome; None when it was refused as another's (NotOwner) and the page
    was answered 409 `needs_force`, to ask the operator to confirm again."""
    try:
        return await trio.to_thread.run_sync(act)
    except NotOwner as refused:
        await send_error(
            request.send,
            409,
            f"{target} belongs to {refused.owner}, not {principal.id}",
            hint=f"confirm again to {action} it anyway (the CLI's --force)",
            needs_force=True,
            owner=refused.owner,
        )
        return None

"""A remote run's verbs for the MCP tools and the dashboard: `status`, `result`, `kill`,
`cancel` and `message` given `run:<host>/<id>`, answered as one JSON object (the CLI's
`forward` streams the host's output to its own terminal instead; a message goes through
the host's outbox, as `actors message` sends it).

The same rules as the CLI's: the placement must be this root's, only the placing
session (or a forced call) controls the run, the host's own verb runs over the host's
connection, and a kill or cancel the host did ends the placement here.
"""

from __future__ import annotations

from typing import Any

from runtime.core.errors import BadInput, Conflict
from runtime.core.terminal import one_line
from runtime.hosts.address import RemoteRef, remote_ref
from runtime.hosts.host import Host, error_lines
from runtime.hosts.records import end_if_unknown, end_placement, owned_placement
from runtime.hosts.remote import CONTROL_VERBS, SESSION_VERBS, STOPS
from runtime.runs.ownership import Principal
from runtime.store.layout import StateRoot

VERBS = frozenset({"status", "result", "kill", "cancel"})
"""The verbs answered by the host's own `VERB --json` (a message goes by the outbox)."""

MAX_ANSWER = 4 << 20
"""The most of a host's JSON answer that is read (a result's output preview is far less)."""


def remote_json(
    root: StateRoot,
    address: str,
    verb: str,
    *,
    principal: Principal,
    force: bool = False,
) -> dict[str, Any]:
    """The host's `actors VERB --json -- run:ID` for the run at `address`, as a dict
    naming the run by its address here."""
    ref = remote_ref(address)
    if ref is None or verb not in VERBS:
        raise BadInput(f"{address[:80]!r} is not a remote run's address", hint="run:HOST/ID")
    host = Host.load(root, ref.host)
    acting = principal if verb in CONTROL_VERBS else None
    owned_placement(root, ref, acting, force=force, action=verb)
    mark = ["--session", host.record["session"]] if verb in SESSION_VERBS else []
    argv = [verb, *mark, "--json", "--", f"run:{ref.run}"]
    from runtime.core import config

    done = host.run(argv, timeout=config.seconds(config.HOST_TIMEOUT))
    if done.returncode != 0:
        if verb in ("kill", "cancel"):
            end_if_unknown(root, ref.host, ref.run, done.stderr)
        said = error_lines(done.stderr)
        why = said[-1] if said else f"exit status {done.returncode}"
        raise Conflict(f"on host {host.name}: {why}", hint=f"actors status {ref}")
    found = host.answer(verb, done.stdout, max_bytes=MAX_ANSWER)
    if verb in ("kill", "cancel"):
        end_placement(root, ref.host, ref.run, "killed" if verb == "kill" else "cancelled")
    return _named(found, ref)


def remote_message(
    root: StateRoot,
    address: str,
    kind: str,
    body: Any,
    *,
    principal: Principal,
    force: bool = False,
    summary: str | None = None,
) -> dict[str, Any]:
    """A message to a remote run, through the host's outbox as `actors message` sends it
    (queue_message: durable here, delivered once). `control.kill` and `control.stop` are
    the host's kill and cancel (its end is then known here: an owner's stop sends no
    follow-up home)."""
    from runtime.hosts.outbox import outcome
    from runtime.hosts.remote import RemoteMessage, queue_message

    stop = STOPS.get(kind)
    if stop is not None:
        return remote_json(root, address, stop, principal=principal, force=force)
    call = RemoteMessage(address, kind, body, summary, None, force, principal.id, True)
    host, now = queue_message(root, call, principal)
    if now["state"] == "refused":
        answer = now.get("answer") or {}
        why = one_line(str(answer.get("error") or "refused"), 400)
        raise Conflict(f"on host {host.name}: {why}", hint=f"actors status {address}")
    return outcome(host, now)


def _named(found: dict[str, Any], ref: RemoteRef) -> dict[str, Any]:
    """The host's answer with the run named by its address here, and its host."""
    address = str(ref)
    out = dict(found)
    for key in ("run", "address"):
        if key in out:
            out[key] = address
    out["host"] = ref.host
    return out

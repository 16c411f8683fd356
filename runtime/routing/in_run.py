"""The in-run side of messaging: what a recipe's own processes call (`actors emit`,
`actors recv`, finishing a claimed message). Every verb here acts as the calling run
(or its branch, `$ACTORS_BRANCH`), identified by its run token.

Separate from `router` because its callers are the other way round: the router
delivers into a run from outside; these read and write from inside one. A consumer
script (`import actors; actors.recv()`) imports only what `recv` needs: what only
`emit` needs is imported inside it (tests/actors/test_import_budget.py holds this).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from runtime.core import config
from runtime.core.errors import BadInput, Conflict, Refused
from runtime.core.faults import pause_point
from runtime.messaging.boxes import CONTROL_TYPES, branch_mailbox, run_mailbox
from runtime.runs.ownership import Principal
from runtime.store.layout import StateRoot
from runtime.views.status import find_run

if TYPE_CHECKING:
    from runtime.messaging.entries import Holder, MailboxEntry
    from runtime.messaging.envelope import Envelope
    from runtime.routing.outcomes import SendOutcome


def current_branch() -> str | None:
    """`$ACTORS_BRANCH`, validated: it becomes a path component of the branch inbox."""
    return config.branch()


_IN_RUN_WORDS = {
    "emit": "emit actor messages",
    "recv": "receive its run's messages",
}
"""What each in-run verb does, for the refusal outside a run."""


def _sender_in_run(principal: Principal, verb: str = "emit") -> tuple[str, str]:
    if not principal.via_run_token:
        raise Refused(
            f"only a process inside a run can {_IN_RUN_WORDS[verb]}",
            hint=f"run `actors {verb}` from a recipe's script (it sets $ACTORS_RUN_ID)",
        )
    run_id = principal.id.removeprefix("run:")
    branch = current_branch()
    return run_id, (f"branch:{run_id}/{branch}" if branch else principal.id)


def emit(
    root: StateRoot,
    kind: str,
    body: Any,
    principal: Principal,
    *,
    to: str = "coordinator",
    summary: str | None = None,
    level: str = "info",
    fsync: bool = True,
    delivery: str = "log",
) -> SendOutcome:
    """Append an actor message from the calling run to its outbox (or its room).

    `delivery`: `log` (outbox only, for inspect), `notify` (also to the coordinator
    session, on-idle), `followup` (also to the coordinator session, immediately).
    """
    if delivery not in ("log", "notify", "followup"):
        raise BadInput(f"invalid delivery {delivery!r}", hint="use log, notify or followup")
    # deferred (start-up cost): a consumer that only calls `recv` never loads the
    # envelope builder, the secret masker or the room timeline
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.messaging.addresses import parse_address
    from runtime.messaging.envelope import make_envelope
    from runtime.routing.rooms import post_room
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import LOG

    run_id, sender = _sender_in_run(principal)
    paths, run = find_run(root, run_id)
    if to == "room":
        to = f"room:{run_id}"
    address = parse_address(to)
    if address.kind == "session" and address.target != run.get("owner_id"):
        raise Refused(f"run {run_id} may only message its own session {run.get('owner_id')}")
    if address.kind not in ("coordinator", "session", "room"):
        raise BadInput(f"emit sends to coordinator, room or session:<id>, not {to}")
    envelope = make_envelope(
        to=to,
        type=kind,
        body=body,
        sender=sender,
        summary=summary,
        level=level,
        extra={"run": run_id, "run_instance_id": run["run_instance_id"]},
    )
    # the outbox, the room timeline and the follow-up never hold the run's secrets
    envelope = cast("Envelope", redact_deep(envelope, run_secrets(run)))
    if address.kind == "room":
        if address.target != run_id:
            raise Refused(f"run {run_id} may only post to its own room room:{run_id}")
        return post_room(paths, run, envelope)
    append_jsonl(paths.outbox, {**envelope, "delivery": delivery}, fsync=fsync, compactor=LOG)
    outcome: SendOutcome = {"to": to, "type": kind, "id": envelope["id"], "state": "emitted"}
    if delivery != "log":
        # deferred for start-up cost: only notify / followup emits need it
        from runtime.delivery.followups import deliver

        mode = "immediate" if delivery == "followup" else "on-idle"
        outcome["delivery"] = deliver(root, run, {**envelope, "delivery": delivery}, mode=mode).get(
            "state"
        )
    return outcome


def recv(
    root: StateRoot,
    principal: Principal,
    *,
    types: tuple[str, ...] | None = None,
    timeout: float | None = None,
) -> MailboxEntry | None:
    """Claim the next message for the calling run (or branch); None on timeout."""
    run_id, _ = _sender_in_run(principal, "recv")
    paths, _ = find_run(root, run_id)
    branch = current_branch()
    box = branch_mailbox(paths, branch) if branch else run_mailbox(paths)
    got = box.wait_claim(
        timeout=timeout,
        types=types,
        exclude_types=() if branch else CONTROL_TYPES,
        consumer=f"recv:{branch or run_id}",
    )
    return got[0] if got else None


def finish(
    root: StateRoot, principal: Principal, entry_id: str, *, ok: bool, error: str | None = None
) -> None:
    run_id, _ = _sender_in_run(principal, "recv")  # acknowledges what recv handed out
    paths, _ = find_run(root, run_id)
    branch = current_branch()
    box = branch_mailbox(paths, branch) if branch else run_mailbox(paths)
    pause_point("messaging.finish.before_mark")
    # Check and mark in one step under the claim lock: a consumer that stalled past its
    # lease must not acknowledge a message another consumer has claimed in the meantime.
    with box.deciding():
        entry = box.refresh().get(entry_id)
        holder: Holder = (entry.get("claimed_by") or {}) if entry is not None else {}
        if entry is None or entry.get("state") != "claimed" or holder.get("pid") != os.getpid():
            raise Conflict(
                f"message {entry_id} is not claimed by this process",
                hint="its lease may have expired and another consumer taken it",
            )
        if ok:
            box.mark(entry_id, "handled")
        else:
            box.mark(entry_id, "failed", error=error)
    pause_point("messaging.finish.after_mark")

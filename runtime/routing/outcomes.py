"""What a send returns: the `message` / `emit` verbs' answer, and the Python API's.

A TypedDict (a plain dict at run time, so the CLI prints it as JSON unchanged). Callers
on the `message` path import it only under `TYPE_CHECKING`: naming the shape costs no
start-up time.
"""

from __future__ import annotations

from typing import Required, TypedDict


class SendOutcome(TypedDict, total=False):
    """Where one message went; `state` says what happened to it: `queued` / `sent` (a run
    inbox, `route` run or branch), `posted` (a room), `emitted` (the run's outbox; with
    `delivery`, the follow-up's delivery state), `handled` (`control.archive` /
    `control.prune` of a finished run) or `spawned` (a `tool:` call: the new run)."""

    to: Required[str]
    state: Required[str]
    type: str
    id: str
    route: str
    delivery: str | None
    archived_to: str
    run: str
    address: str
    pruned: bool
    status: str
    preserved: dict[str, str]


__all__ = ["SendOutcome"]

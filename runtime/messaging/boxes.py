"""Where each run keeps its mailboxes, and which message types a run accepts.

Shared by the runner (which consumes `control.*`), the router (which delivers to run and
branch addresses), follow-ups (a child's end posted to its parent run) and inspect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.messaging.mailbox import Mailbox, mailbox_for
from runtime.store.layout import RunPaths

if TYPE_CHECKING:
    from runtime.store.records import RunRecord

CONTROL_TYPES = ("control.stop", "control.kill", "control.archive", "control.prune")
"""Types every run accepts; its runner consumes them itself."""


def run_mailbox(paths: RunPaths) -> Mailbox:
    return mailbox_for(paths.inbox, paths.doorbells, paths.wake)


def control_mailbox(paths: RunPaths) -> Mailbox:
    """The run's inbox as its runner sees it: a fold of the `control.*` entries only, so
    unread data messages cost the runner no memory (a fresh object, not the shared one)."""
    return Mailbox(paths.inbox, paths.doorbells, paths.wake, types=CONTROL_TYPES)


def branch_mailbox(paths: RunPaths, branch: str) -> Mailbox:
    return mailbox_for(paths.branch_inbox(branch), paths.branch_doorbells(branch), paths.wake)


def accepted_types(run: RunRecord) -> list[str]:
    """The types the recipe declared in `mailbox.accepts` (besides `control.*`)."""
    entries = (run.get("mailbox") or {}).get("accepts") or []
    return [e["type"] if isinstance(e, dict) else str(e) for e in entries]

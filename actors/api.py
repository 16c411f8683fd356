"""The Python API: the same verbs as the CLI, for scripts and SDK users.

Every function takes run references as `run:ID` or a bare id and raises
`runtime.core.errors.ActorsError` subclasses for anything the caller can fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from runtime.core.errors import Conflict
from runtime.store.layout import StateRoot, parse_run_ref
from runtime.store.reads import read_json, read_text_tail
from runtime.views.status import TERMINAL

if TYPE_CHECKING:  # imported for real only when a sender is made
    from runtime.messaging.entries import MailboxEntry
    from runtime.messaging.envelope import Envelope
    from runtime.routing.outcomes import SendOutcome
    from runtime.routing.sender import Sender
    from runtime.store.records import ListedRun, ResultRecord, RunRecord, RunStatus


def _root(home: str | None) -> StateRoot:
    from pathlib import Path

    return StateRoot(Path(home).absolute()).verify() if home else StateRoot.from_env()


def spawn(
    recipe: str | None = None,
    *,
    template: str | None = None,
    as_: str | None = None,
    values: Mapping[str, Any] | None = None,
    session: str | None = None,
    secret_names: list[str] | None = None,
    group: str | None = None,
    after: list[str] | None = None,
    home: str | None = None,
) -> RunRecord:
    """Start a detached run; returns its run.json record (`record["run"]` is the id).
    `group`: it waits for a free slot of that group; `after`: for those runs to end
    `done` (it ends `skipped` if one ends otherwise)."""
    from runtime.runs.spawn import SpawnRequest, spawn as _spawn

    request = SpawnRequest(
        recipe=recipe,
        template=template,
        run_id=as_,
        values=dict(values or {}),
        session=session,
        secret_names=list(secret_names or []),
        group=group,
        after=list(after or []),
    )
    return _spawn(request, _root(home))


def restart(
    run: str,
    *,
    as_: str | None = None,
    session: str | None = None,
    force: bool = False,
    home: str | None = None,
) -> RunRecord:
    """Start a finished run again with the same recipe, values and group; the new run's
    record (its id: `<run>-2`, `-3`, ... unless `as_`)."""
    from runtime.runs.restart import restart as _restart

    return _restart(
        _root(home),
        parse_run_ref(run),
        run_id=parse_run_ref(as_) if as_ else None,
        session=session,
        force=force,
    )


def status(run: str, *, home: str | None = None) -> RunStatus:
    """Derived status plus progress counters."""
    from runtime.views.status import status_of

    return status_of(_root(home), parse_run_ref(run))


def runs(*, home: str | None = None) -> list[ListedRun]:
    """Every run in the state root, newest first."""
    from runtime.views.index import list_runs

    return list_runs(_root(home))


def wait(run: str, *, timeout: float | None = None, home: str | None = None) -> RunStatus:
    """Block until the run is terminal (or `timeout` seconds pass); returns its status."""
    from runtime.views.waiting import wait_for

    return wait_for(_root(home), parse_run_ref(run), timeout=_seconds(timeout))


def result(run: str, *, home: str | None = None) -> ResultRecord | RunStatus:
    """result.json of a finished run."""
    from runtime.views.status import derive, find_run

    paths, record = find_run(_root(home), parse_run_ref(run))
    summary = derive(paths, record)
    if summary["status"] not in TERMINAL:
        raise Conflict(f"run {paths.run_id} is still {summary['status']}")
    found = read_json(paths.result)
    return cast("ResultRecord", found) if isinstance(found, dict) else summary


def tail(
    run: str, lines: int = 20, *, stream: str = "stdout", home: str | None = None
) -> list[str]:
    """The last lines of the run's stdout.log or stderr.log."""
    paths = _root(home).run(parse_run_ref(run))
    return read_text_tail(paths.stderr if stream == "stderr" else paths.stdout, lines)


def cancel(
    run: str,
    *,
    force: bool = False,
    grace: float = 5.0,
    session: str | None = None,
    home: str | None = None,
) -> RunStatus:
    """Graceful stop (SIGTERM, grace, SIGKILL) of an owned run."""
    from runtime.runs.control import cancel as _cancel
    from runtime.runs.ownership import current_principal

    root = _root(home)
    return _cancel(
        root, parse_run_ref(run), current_principal(root, session), force=force, grace=grace
    )


def kill(
    run: str, *, force: bool = False, session: str | None = None, home: str | None = None
) -> RunStatus:
    """Immediate SIGKILL of an owned run's whole process tree."""
    from runtime.runs.control import kill as _kill
    from runtime.runs.ownership import current_principal

    root = _root(home)
    return _kill(root, parse_run_ref(run), current_principal(root, session), force=force)


def message(
    to: str,
    type: str,
    body: Any = None,
    *,
    summary: str | None = None,
    reply_to: str | None = None,
    force: bool = False,
    session: str | None = None,
    fsync: bool = True,
    home: str | None = None,
) -> SendOutcome:
    """Send one envelope (durable append, then doorbell); returns where it went."""
    from runtime.routing.router import send
    from runtime.runs.ownership import current_principal

    root = _root(home)
    return send(
        root,
        to,
        type,
        body,
        current_principal(root, session),
        force=force,
        summary=summary,
        reply_to=reply_to,
        fsync=fsync,
    )


def recv(
    types: tuple[str, ...] | list[str] | None = None,
    *,
    timeout: float | None = None,
    ack: bool = True,
    home: str | None = None,
) -> Envelope | MailboxEntry | None:
    """Inside a run: claim the next message (blocking); returns its envelope, or None.

    With `ack=True` (default) it is marked handled at once. With `ack=False` the return
    value is the whole inbox entry; call `ack(entry["id"])` when done (a consumer that
    dies before that gives the message back after its claim is found dead).
    """
    from runtime.routing.in_run import finish, recv as _recv
    from runtime.runs.ownership import current_principal

    root = _root(home)
    principal = current_principal(root)
    kinds = tuple(types) if types else None
    entry = _recv(root, principal, types=kinds, timeout=_seconds(timeout))
    if entry is None:
        return None
    if not ack:
        return entry
    finish(root, principal, entry["id"], ok=True)
    return entry["envelope"]


def ack(
    entry_id: str, *, ok: bool = True, error: str | None = None, home: str | None = None
) -> None:
    """Mark a message claimed with `recv(ack=False)` as handled (or failed)."""
    from runtime.routing.in_run import finish
    from runtime.runs.ownership import current_principal

    root = _root(home)
    finish(root, current_principal(root), entry_id, ok=ok, error=error)


def emit(
    type: str,
    body: Any = None,
    *,
    to: str = "coordinator",
    summary: str | None = None,
    level: str = "info",
    delivery: str = "log",
    home: str | None = None,
) -> SendOutcome:
    """Inside a run: append an actor message to the run's outbox (or its room).

    `delivery="notify"` or `"followup"` also delivers it to the coordinator session.
    """
    from runtime.routing.in_run import emit as _emit
    from runtime.runs.ownership import current_principal

    root = _root(home)
    return _emit(
        root,
        type,
        body,
        current_principal(root),
        to=to,
        summary=summary,
        level=level,
        delivery=delivery,
    )


def inspect(
    target: str,
    view: str = "status",
    *,
    lines: int = 40,
    status: str = "all",
    home: str | None = None,
) -> dict[str, Any]:
    """A bounded read of a run, branch, room or session (see the CLI's `inspect`): every
    list holds at most `lines` records (0-2000; the CLI's `-n` and the MCP tool's
    `lines` have the same default and bounds)."""
    from runtime.views.inspect import inspect as _inspect

    return _inspect(_root(home), target, view, lines=lines, status=status)


def inspect_text(
    target: str,
    view: str = "status",
    *,
    lines: int = 40,
    status: str = "all",
    home: str | None = None,
) -> str:
    """The same view in the compact text `actors inspect` prints without `--json` (one
    line per record): what a model with a small context should read."""
    from runtime.views.inspect import compact_lines

    data = inspect(target, view, lines=lines, status=status, home=home)
    return "\n".join(compact_lines(data))


def sender(
    to: str,
    *,
    force: bool = False,
    fsync: bool = True,
    session: str | None = None,
    home: str | None = None,
) -> Sender:
    """A sender streaming many messages to one run (use it as a context manager)."""
    from runtime.routing.sender import Sender
    from runtime.runs.ownership import current_principal

    root = _root(home)
    return Sender(root, to, current_principal(root, session), force=force, fsync=fsync)


def _seconds(timeout: float | None) -> float | None:
    """A `timeout` by the CLI's one rule (runtime.core.config.parse_seconds): NaN, an
    infinite, negative or month-long wait is an ActorsError, not a crash in a poll."""
    from runtime.core.config import SECONDS_RULE, parse_seconds
    from runtime.core.errors import BadInput

    if timeout is None:
        return None
    parsed = parse_seconds(str(timeout)) if isinstance(timeout, int | float) else None
    if parsed is None or isinstance(timeout, bool):
        raise BadInput(f"timeout {timeout!r} is not {SECONDS_RULE}")
    return parsed

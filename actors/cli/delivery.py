"""Sessions and delivery: session, inbox, flush, reconcile, watch, doctor."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

import click

from actors.cli._format import emit_json
from actors.cli._inbox_wait import session_id as _session_id
from actors.cli._options import SECONDS
from runtime.core import config
from runtime.core.errors import BadInput
from runtime.core.terminal import cell
from runtime.delivery.registry import BUILTIN
from runtime.store.layout import StateRoot


def _root() -> StateRoot:
    return StateRoot.from_env()


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadInput(
                f"-o {pair!r} is not KEY=VALUE", hint="e.g. -o url=http://127.0.0.1:9000/hook"
            )
        out[key] = value
    return out


@click.group("session")
def session_group() -> None:
    """Register and manage coordinator sessions (where follow-ups are delivered)."""


@session_group.command("register")
@click.option(
    "--harness",
    required=True,
    metavar="NAME",
    help=f"A built-in adapter ({', '.join(BUILTIN)}) or an installed third-party one.",
)
@click.option(
    "--id",
    "session_id",
    metavar="ID",
    help="Session id (default: $ACTORS_SESSION, else generated).",
)
@click.option(
    "-o",
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Adapter option (repeatable).",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Do not check that the target answers now (a server you start later).",
)
@click.option("--json", "as_json", is_flag=True)
def session_register(
    harness: str, session_id: str | None, options: tuple[str, ...], no_check: bool, as_json: bool
) -> None:
    """Register a session; prints its id (export it as ACTORS_SESSION).

    Every -o key must be one the harness takes (or `mode` / `fallback`), and the target
    must answer now (a tmux pane, an OpenCode, Codex or pi server) unless --no-check.
    """
    from runtime.core.ids import short_suffix
    from runtime.delivery.sessions import register_session

    ident = session_id or config.text(config.SESSION) or f"sess-{short_suffix()}"
    record = register_session(
        _root(), ident, harness, _options(options), reach=not no_check, cwd=os.getcwd()
    )
    if as_json:
        from runtime.compiler.redact import redact_session

        emit_json(redact_session(record))
    else:
        click.echo(ident)
    # on stderr for every caller (an agent reads it too), never mixed into the id or JSON
    click.echo(f"export {config.SESSION.name}={ident}  # runs you spawn report here", err=True)


@session_group.command("ls")
@click.option("--json", "as_json", is_flag=True)
def session_ls(as_json: bool) -> None:
    """List sessions with their harness and unread follow-ups."""
    from runtime.compiler.redact import redact_session
    from runtime.delivery.sessions import SessionInbox, list_sessions
    from runtime.store.layout import session_paths

    rows = []
    for record in list_sessions(_root()):
        unread = len(SessionInbox(session_paths(_root(), record["id"])).unread())
        rows.append({**redact_session(record), "unread": unread})  # passwords, tokens
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(
            cell(
                f"{r['id']:<24} {r.get('harness', 'file')!s:<10} unread={r['unread']}"
                + ("" if r.get("registered", True) else "  (unregistered)")
                + (f"  (damaged: {r['damaged']})" if r.get("damaged") else "")
            )
        )


@session_group.command("show")
@click.argument("session_id")
def session_show(session_id: str) -> None:
    """Print a session's record and delivery state."""
    from runtime.core.errors import NotFound
    from runtime.delivery.engine import DeliveryRunner
    from runtime.delivery.sessions import load_session
    from runtime.store.layout import session_paths

    if not session_paths(_root(), session_id).dir.is_dir():
        raise NotFound(f"no session {session_id}", hint="`actors session ls` lists them")
    from runtime.compiler.redact import redact_deep, redact_session, secret_texts

    record = load_session(_root(), session_id)
    masked = redact_session(record)  # passwords, tokens
    states = DeliveryRunner(_root()).states(session_id)
    masked["deliveries"] = redact_deep(states, secret_texts(record.get("options") or {}))
    emit_json(masked)


@session_group.command("forget")
@click.argument("session_id")
def session_forget(session_id: str) -> None:
    """Delete a session's record, inbox and delivery journal."""
    from runtime.delivery.sessions import forget_session

    forget_session(_root(), session_id)
    click.echo(f"session {session_id} forgotten")


@click.group("inbox")
def inbox_group() -> None:
    """Read follow-ups delivered to a session."""


@inbox_group.command("read")
@click.option("--session", metavar="ID", help="Session (default: $ACTORS_SESSION, else your user).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--peek", is_flag=True, help="Show without marking them read.")
@click.option(
    "--bodies", is_flag=True, help="Each follow-up's body too (default: its one-line summary)."
)
def inbox_read(session: str | None, as_json: bool, peek: bool, bodies: bool) -> None:
    """Print every unread follow-up at once and mark them read (only once the text is
    written out: a write that fails leaves them unread).

    Compact by default, as the MCP inbox_read tool: each follow-up's header and summary
    (which names the run, its outcome or result line, and the next step); --bodies adds
    the bodies, --json gives the whole envelopes."""
    from runtime.delivery.engine import read_inbox

    root, owner = _root(), _session_id(session)

    def show(unread: list[dict[str, Any]]) -> None:
        if as_json:
            emit_json([e["envelope"] for e in unread])
        else:
            # an agent reads this: each follow-up fenced and bounded (runtime.delivery.render)
            from runtime.delivery.render import followups_text

            if bodies and sys.stdout.isatty():  # the keep offer is for an agent, not a person
                unread = [_without_keep(e) for e in unread]
            click.echo(followups_text(root, owner, unread, with_body=bodies))
        sys.stdout.flush()  # out (or OutputLost / BrokenPipeError: they stay unread)

    unread = read_inbox(root, owner, peek=peek, boundary="inbox read", show=show)
    if peek:
        show(unread)


def _without_keep(entry: dict[str, Any]) -> dict[str, Any]:
    """An inbox entry without its body's `keep` offer (a question for an agent to put to
    the operator), for a person reading at a terminal."""
    body = entry["envelope"].get("body")
    if not isinstance(body, dict) or "keep" not in body:
        return entry
    trimmed = {k: v for k, v in body.items() if k != "keep"}
    return {**entry, "envelope": {**entry["envelope"], "body": trimmed}}


@inbox_group.command("wait")
@click.option("--session", metavar="ID", help="Session (default: $ACTORS_SESSION, else your user).")
@click.option("--timeout", type=SECONDS, metavar="SECONDS", help="Give up after this long (exit 75).")
@click.option("--json", "as_json", is_flag=True, help="Print the wake as JSON.")
def inbox_wait(session: str | None, timeout: float | None, as_json: bool) -> None:
    """Block until this session has unread follow-ups; print one line and exit 0.

    Made to run as a background shell task of an agent (Claude Code, Copilot CLI): when it
    exits, the harness tells the model, which reads the follow-ups and starts it again. It
    sleeps on a doorbell FIFO of the session (no polling, no inotify watch), armed before
    the inbox is checked, so a follow-up that lands in between still wakes it. Meanwhile it
    guards the session's runs: a runner that dies without a result is folded and its
    `run.exited` follow-up wakes this wait. A timeout exits 75 with nothing on stdout.
    """
    # the guarding is runtime.runner.guardian's (named here, not in the help text)
    from actors.cli._inbox_wait import inbox_wait as body

    body(session, timeout, as_json)


@click.command("flush")
@click.option("--session", metavar="ID", help="Session (default: $ACTORS_SESSION, else your user).")
@click.option("--delivery", metavar="ID", help="Only this delivery.")
def flush_cmd(session: str | None, delivery: str | None) -> None:
    """Deliver held (manual / boundary-mode) and waiting follow-ups now."""
    from runtime.core.errors import NotFound
    from runtime.delivery.engine import DeliveryRunner

    runner, owner = DeliveryRunner(_root()), _session_id(session)
    known = () if delivery is None else {*runner.states(owner), *_inbox_ids(runner, owner)}
    if delivery is not None and delivery not in known:
        raise NotFound(
            f"session {owner} has no delivery {delivery!r}",
            hint=f"`actors session show {owner}` lists its deliveries",
        )
    receipts = runner.flush(owner, delivery)
    for r in receipts:
        click.echo(f"{r.delivery_id} {r.status}" + (f" ({r.reason})" if r.reason else ""))
    if not receipts:
        click.echo("nothing to flush", err=True)


def _inbox_ids(runner: Any, owner: str) -> set[str]:
    """The session's deliveries still to be made, by the inbox (one whose journal line a
    crash left unwritten is there too)."""
    return {str(entry.get("id")) for entry in runner.pending(owner)}


@click.command("reconcile")
@click.option("--json", "as_json", is_flag=True)
def reconcile_cmd(as_json: bool) -> None:
    """Mark dead runners' runs exited, stop their leftovers, deliver owed follow-ups."""
    from runtime.runs.reconcile import reconcile

    root = _root()
    report = reconcile(root)
    if root.hosts.is_dir():  # the links of hosts with runs still out, back if one died
        from runtime.hosts.link import ensure_links

        ensure_links(root)
    if as_json:
        emit_json(report)
    else:
        click.echo(
            f"exited={len(report['exited'])} followed_up={len(report['followed_up'])} "
            f"delivery_attempts={report['retried']}"
        )


@click.command("watch")
@click.option("--timeout", type=SECONDS, metavar="SECONDS", help="Stop after this long.")
def watch_cmd(timeout: float | None) -> None:
    """Observe every run and deliver follow-ups as they happen (optional; Ctrl-C stops).

    It guards every run of the state root (a runner that dies without a result is folded
    at once) and retries due deliveries exactly when they fall due. Nothing wakes it on a
    timer: a quiet state root costs it no CPU."""
    # the guarding is runtime.runner.guardian's (named here, not in the help text)
    import select

    from runtime.delivery.engine import retry_due
    from runtime.runner.guardian import Guard
    from runtime.runs.reconcile import reconcile
    from runtime.store.writes import ensure_dir

    root = _root()
    ensure_dir(root.runs)
    deadline = None if timeout is None else time.monotonic() + timeout
    guard = Guard(root, None)  # armed before the first look
    reconcile(root)
    guard.scan()
    try:
        with contextlib.closing(guard):
            while True:
                _count, retry_in = retry_due(root)
                if sys.stderr.isatty():
                    click.echo(f"\r  {_active_count(root)} active run(s)   ", err=True, nl=False)
                waits = [w for w in (retry_in, _left(deadline)) if w is not None]
                if deadline is not None and _left(deadline) == 0:
                    return
                poller = select.poll()
                for fd in guard.fds():
                    poller.register(fd, select.POLLIN)
                ms = int(min(waits) * 1000) + 1 if waits else None
                for fd, _ in poller.poll(ms):
                    guard.handle(fd)
    except KeyboardInterrupt:
        pass


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _active_count(root: StateRoot) -> int:
    from runtime.views.index import list_runs
    from runtime.views.status import ACTIVE

    return sum(1 for r in list_runs(root) if r.get("status") in ACTIVE)


@click.group("doctor")
def doctor_group() -> None:
    """Live diagnostics."""


@doctor_group.command("delivery")
@click.option("--session", metavar="ID", help="Session (default: $ACTORS_SESSION, else your user).")
def doctor_delivery(session: str | None) -> None:
    """Probe the session's adapter for real and print the DELIVERY_LEVELS block (D0-D8)."""
    from runtime.delivery.doctor import probe

    for line in probe(_root(), _session_id(session)):
        click.echo(line)

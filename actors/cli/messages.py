"""Messaging commands: message, recv, emit."""

from __future__ import annotations

import sys

import click

from actors.cli._format import emit_json
from actors.cli._options import SECONDS
from actors.cli.completion import live_run_addresses, message_types
from runtime.store.layout import StateRoot


@click.command("message")
@click.argument("address", shell_complete=live_run_addresses)
@click.argument("type", shell_complete=message_types)
@click.argument("body", required=False)
@click.option("--body-json", "body_json", is_flag=True, help="BODY is JSON (default: text).")
@click.option("--summary", metavar="TEXT", help="One-line summary (default: the type).")
@click.option("--reply-to", metavar="ID", help="The message id this answers.")
@click.option("--force", is_flag=True, help="Send to another session's run, or an undeclared type.")
@click.option("--session", metavar="ID", help="Act as this session.")
@click.option(
    "--no-fsync", is_flag=True, help="Skip the durability fsync (faster; a crash may lose it)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def message_cmd(
    address: str,
    type: str,
    body: str | None,
    body_json: bool,
    summary: str | None,
    reply_to: str | None,
    force: bool,
    session: str | None,
    no_fsync: bool,
    as_json: bool,
) -> None:
    """Send a TYPE message to ADDRESS (run:ID, branch:RUN/B, room:RUN, tool:NAME, ...).

    \b
    Examples:
      actors message run:music player.next
      actors message branch:swarm/front task.assign '{"slice": "T-12"}' --body-json
      actors message run:music control.stop
    """
    from actors.cli._messaging import message

    message(
        address,
        type,
        body,
        body_json=body_json,
        summary=summary,
        reply_to=reply_to,
        force=force,
        session=session,
        no_fsync=no_fsync,
        as_json=as_json,
    )


@click.command("recv")
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only messages of this type.")
@click.option("--timeout", type=SECONDS, metavar="SECONDS", help="Give up after this long (exit 75).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole envelope as JSON.")
def recv_cmd(types: tuple[str, ...], timeout: float | None, as_json: bool) -> None:
    """Inside a run: block until the next message for this run (or branch), print it.

    Without --json prints `TYPE BODY` on one line. The message is marked handled once
    printed; a failure to print leaves it failed for inspection.
    """
    import json

    from runtime.routing.in_run import finish, recv
    from runtime.runs.ownership import current_principal

    root = StateRoot.from_env()
    principal = current_principal(root)
    entry = recv(root, principal, types=types or None, timeout=timeout)
    if entry is None:
        sys.exit(75)
    envelope = entry["envelope"]
    try:
        if as_json:
            click.echo(json.dumps(envelope, ensure_ascii=False))
        else:
            body = envelope.get("body")
            text = body if isinstance(body, str) else "" if body is None else json.dumps(body)
            click.echo(f"{envelope['type']} {text}".rstrip())
        sys.stdout.flush()
    except OSError as exc:  # e.g. a closed pipe: the message was not handed over
        finish(root, principal, entry["id"], ok=False, error=str(exc))
        sys.exit(1)
    finish(root, principal, entry["id"], ok=True)


@click.command("emit")
@click.argument("type")
@click.argument("body", required=False)
@click.option("--body-json", "body_json", is_flag=True, help="BODY is JSON (default: text).")
@click.option(
    "--to",
    default="coordinator",
    show_default=True,
    metavar="ADDRESS",
    help="coordinator, room, or session:<id>.",
)
@click.option("--summary", metavar="TEXT", help="One-line summary (default: the type).")
@click.option("--level", type=click.Choice(["info", "warning", "error"]), default="info")
@click.option("--print", "show", is_flag=True, help="Print the outcome (quiet by default).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.option(
    "--deliver",
    "delivery",
    type=click.Choice(["log", "notify", "followup"]),
    default="log",
    show_default=True,
    help="Also deliver to the coordinator session (notify: on-idle, followup: now).",
)
def emit_cmd(
    type: str,
    body: str | None,
    body_json: bool,
    to: str,
    summary: str | None,
    level: str,
    show: bool,
    delivery: str,
    as_json: bool,
) -> None:
    """Inside a run: append an actor message (e.g. a notify or followup) to the outbox."""
    from actors.cli._messaging import emit

    emit(
        type,
        body,
        body_json=body_json,
        to=to,
        summary=summary,
        level=level,
        show=show,
        delivery=delivery,
        as_json=as_json,
    )


@click.command("inspect")
@click.argument("target")
@click.option(
    "--view",
    default="status",
    show_default=True,
    help="run: status|tail|messages|artifacts|files|mailbox|communication; "
    "room: status|messages|roster; session: status|runs; branch: mailbox.",
)
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(0, 2000),
    default=40,
    show_default=True,
    help="How many records of each list at most (the newest).",
)
@click.option(
    "--status",
    "status_filter",
    default="all",
    show_default=True,
    help="For session targets: all, active, running, terminal, done, failed, ...",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole view as JSON.")
def inspect_cmd(target: str, view: str, lines: int, status_filter: str, as_json: bool) -> None:
    """Read TARGET on purpose: a run, branch:RUN/B, room:RUN, session:ID or session:all."""
    from runtime.views.inspect import compact_lines, inspect

    data = inspect(StateRoot.from_env(), target, view, lines=lines, status=status_filter)
    if as_json:
        emit_json(data)
        return
    for line in compact_lines(data):
        click.echo(line)

"""The bodies of `actors message` and `actors emit`, without click.

Both run on the hand-parsed path (actors.cli._fast) and under click (actors.cli.messages),
so the two paths send and print the same thing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def _body(body: str | None, body_json: bool, as_json: bool) -> Any:
    """The parsed body. `--json` used to mean "the body is JSON" for these two commands and
    now prints the outcome as JSON, so an old script's `'{...}' --json` would send text
    without a word: when the text is itself JSON, say so once on stderr (it still goes as
    text, exactly as asked)."""
    from runtime.messaging.envelope import parse_body

    if as_json and not body_json and body and body.lstrip()[:1] in ("{", "["):
        from runtime.core.bounded_json import Undecodable, decode

        try:
            decode(body)
        except Undecodable:
            pass
        else:
            print(
                "actors: note: BODY is sent as text; pass --body-json to send it as JSON"
                " (--json prints the outcome)",
                file=sys.stderr,
            )
    return parse_body(body, as_json=body_json)


def message(
    address: str,
    type: str,
    body: str | None = None,
    *,
    body_json: bool = False,
    summary: str | None = None,
    reply_to: str | None = None,
    force: bool = False,
    session: str | None = None,
    no_fsync: bool = False,
    as_json: bool = False,
) -> None:
    """The body of `actors message`."""
    from runtime.routing.router import send
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot

    root = StateRoot.from_env()
    outcome = send(
        root,
        address,
        type,
        _body(body, body_json, as_json),
        current_principal(root, session),
        force=force,
        summary=summary,
        reply_to=reply_to,
        fsync=not no_fsync,
    )
    print_outcome(outcome, as_json=as_json)


def emit(
    type: str,
    body: str | None,
    *,
    body_json: bool,
    to: str,
    summary: str | None,
    level: str,
    show: bool,
    delivery: str,
    as_json: bool = False,
) -> None:
    """The body of `actors emit` (its defaults are click's, which the hand parser shares
    through actors.cli.commands)."""
    from actors.cli.commands import EMIT_ARGS
    from runtime.routing.in_run import emit as emit_message
    from runtime.runs.ownership import current_principal
    from runtime.store.layout import StateRoot

    root = StateRoot.from_env()
    outcome = emit_message(
        root,
        type,
        _body(body, body_json, as_json),
        current_principal(root),
        to=to or EMIT_ARGS.defaults["to"],  # an empty --to has always meant the default
        summary=summary,
        level=level,
        delivery=delivery,
    )
    if show or as_json:
        print_outcome(outcome, as_json=as_json)


def print_outcome(outcome: Mapping[str, Any], *, as_json: bool) -> None:
    """Where a message went: `key=value` words, or JSON."""
    if as_json:
        import json

        text = json.dumps(outcome, indent=2, ensure_ascii=False, default=str)
    else:
        text = " ".join(f"{k}={v}" for k, v in outcome.items())
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

"""The bodies of `actors ls` and `actors status`, without click.

Agents poll these between turns (a prompt's status line calls `status --line` every few
seconds), so they run on the hand-parsed fast path (_fast.py) as well as under click;
click's commands call the same functions, so both paths print the same thing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from actors.cli._format import (
    age,
    emit_json,
    padded,
    painted,
    short,
    status_word,
    summary_parts,
    write_line,
)
from runtime.core.errors import BadInput
from runtime.runs.status import ACTIVE, TERMINAL, read_progress
from runtime.store.layout import StateRoot, parse_run_ref


def _out(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _wanted_statuses(statuses: list[str] | tuple[str, ...]) -> set[str]:
    wanted: set[str] = set()
    for value in ",".join(statuses).split(","):
        value = value.strip()
        if not value:
            continue
        if value == "active":
            wanted.update(ACTIVE)
        elif value == "terminal":
            wanted.update(TERMINAL)
        elif value in (*ACTIVE, *TERMINAL, "damaged"):
            wanted.add(value)
        else:
            raise BadInput(
                f"unknown status {value!r}",
                hint="use running, done, failed, cancelled, killed, exited, active or terminal",
            )
    return wanted


def list_view(
    statuses: list[str] | tuple[str, ...] = (),
    *,
    mine: bool = False,
    tree: bool = False,
    session: str | None = None,
    as_json: bool = False,
) -> None:
    """The body of `actors ls`: runs, newest first."""
    from runtime.runs.index import list_runs

    wanted = _wanted_statuses(statuses)
    root = StateRoot.from_env()
    runs = list_runs(root)
    if wanted:
        runs = [r for r in runs if r.get("status") in wanted]
    if mine:
        from runtime.runs.ownership import current_principal

        me = current_principal(root, session).id
        runs = [r for r in runs if r.get("owner_id") == me]
    if as_json:
        emit_json(runs)
        return
    if not runs:
        _out("no runs" + (" matching" if wanted or mine else "") + f" in {root.path}", err=True)
        return
    if tree:
        _out("\n".join(_tree_lines(root, runs)))
        return
    now = time.time()
    rows = []
    for r in runs:
        progress_active = ""
        if r.get("status") in ACTIVE:
            progress_active = str(read_progress(root.run(r["run"])).get("active", ""))
        rows.append(
            [r["run"], status_word(r), age(r.get("created_at"), now), _what(r), progress_active]
        )
    header, *lines = padded(rows, ["RUN", "STATUS", "AGE", "RECIPE", "ACTIVE"])
    write_line(header)
    for r, cells in zip(runs, lines, strict=True):
        write_line([cells[0], painted(r, cells[1]), *cells[2:]] if len(cells) > 1 else cells)


COMMAND_WIDTH = 40


def _what(run: Mapping[str, Any]) -> str:
    """What a run runs: its recipe or tool, else (an inline template) its command."""
    return str(
        run.get("recipe") or run.get("tool") or short(run.get("command"), COMMAND_WIDTH) or "-"
    )


def _tree_lines(root: StateRoot, runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Runs with their child runs nested beneath, and each active run's branches."""
    listed = {r["run"] for r in runs}
    children: dict[str, list[dict[str, Any]]] = {}
    tops = []
    for r in reversed(runs):  # oldest first reads as a story
        parent = str(r.get("parent") or "")
        if parent.startswith("run:") and parent[4:] in listed:
            children.setdefault(parent[4:], []).append(r)
        else:
            tops.append(r)
    now = time.time()
    lines: list[str] = []

    def walk(r: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        joint = "" if top else ("└─ " if last else "├─ ")
        lines.append(
            f"{prefix}{joint}{r['run']}  {status_word(r)}  {age(r.get('created_at'), now)}  {_what(r)}"
        )
        inner = prefix + ("" if top else ("   " if last else "│  "))
        branches: dict[str, Any] = {}
        if r.get("status") in ACTIVE:
            branches = read_progress(root.run(r["run"])).get("branches") or {}
        kids = children.get(r["run"], [])
        for label, state in branches.items():
            lines.append(f"{inner}  · branch {label}: {state}")
        for index, kid in enumerate(kids):
            walk(kid, inner, index == len(kids) - 1, False)

    for r in tops:
        walk(r, "", True, True)
    return lines


def status_view(
    run: str | None = None,
    *,
    line: bool = False,
    session: str | None = None,
    as_json: bool = False,
) -> None:
    """The body of `actors status`: one run in detail, or this session's active work."""
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.runs.status import find_run, full_status

    root = StateRoot.from_env()
    if line:
        text = _status_line(root, session)
        if text:
            _out(text)
        return
    if run is None:
        raise BadInput("which run?", hint="actors status RUN, or actors status --line")
    paths, record = find_run(root, parse_run_ref(run))
    # secrets masked: a reason may quote one
    summary: dict[str, Any] = redact_deep(full_status(paths, record), run_secrets(record))
    if as_json:
        emit_json(summary)
        return
    details = [
        ("recipe", _what(summary)),
        ("age", age(summary.get("created_at"))),
        (
            "steps",
            f"{summary.get('active', 0)} active, {summary.get('completed', 0)} done, "
            f"{summary.get('failed', 0)} failed",
        ),
    ]
    if summary.get("branches"):
        details.append(("branches", ", ".join(f"{k}={v}" for k, v in summary["branches"].items())))
    details += [("owner", summary.get("owner_id") or "-"), ("state", summary["state_dir"])]
    write_line(summary_parts(summary))
    _out("\n".join(f"  {key:<9}{value}" for key, value in details))


def _status_line(root: StateRoot, session: str | None) -> str:
    """One ▷ per active work unit of this session, a ▶ stepping across them each second."""
    from runtime.runs.index import list_runs
    from runtime.runs.ownership import current_principal

    me = current_principal(root, session).id
    units = 0
    for r in list_runs(root):
        if r.get("status") in ACTIVE and r.get("owner_id") == me:
            units += max(1, int(read_progress(root.run(r["run"])).get("active") or 0))
    if not units:
        return ""
    marks = ["▷"] * units
    marks[int(time.time()) % units] = "▶"
    return "".join(marks)

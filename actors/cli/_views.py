"""The bodies of `actors ls` and `actors status`, without click.

Agents poll these between turns (a prompt's status line calls `status --line` every few
seconds), so they run on the hand-parsed fast path (_fast.py) as well as under click;
click's commands call the same functions, so both paths print the same thing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

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
from runtime.core.errors import ActorsError, BadInput
from runtime.core.terminal import cell
from runtime.store.layout import StateRoot, parse_run_ref
from runtime.views.counts import steps_line
from runtime.views.status import ACTIVE, TERMINAL, read_progress

if TYPE_CHECKING:
    from runtime.store.records import ListedRun


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
    from runtime.views.index import list_runs

    wanted = _wanted_statuses(statuses)
    root = StateRoot.from_env()
    runs = list_runs(root)
    placed = root.hosts.is_dir()  # runs placed on hosts: a HOST column (one stat if none)
    if placed:
        from runtime.hosts.remote import placed_rows

        runs = [*cast("list[ListedRun]", placed_rows(root)), *runs]
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
    for index, r in enumerate(runs):
        progress_active = ""
        if r.get("status") in ACTIVE:
            progress = read_progress(root.run(r["run"]))
            progress_active = str(progress.get("active", ""))
            runs[index] = r = _with_progress_damage(r, progress)
        row = [r["run"], status_word(r), *_timing(r, now), _what(r), progress_active]
        rows.append([*row, cell(r.get("host") or "-")] if placed else row)
    titles = [*LS_HEADERS[:2], *TIMING_HEADERS, *LS_HEADERS[2:]] + (["HOST"] if placed else [])
    header, *lines = padded(rows, titles)
    write_line(header)
    for r, cells in zip(runs, lines, strict=True):
        write_line([cells[0], painted(r, cells[1]), *cells[2:]] if len(cells) > 1 else cells)


LS_HEADERS = ("RUN", "STATUS", "RECIPE", "ACTIVE")
TIMING_HEADERS = ("STARTED", "DURATION", "CODE")


def _timing(run: Mapping[str, Any], now: float) -> list[str]:
    """When a run started (local time; the date too when not today), how long it ran
    (so far, while active) and its exit code once it ended."""
    from runtime.core.ids import parse_iso

    try:
        start = parse_iso(str(run.get("created_at")))
    except (TypeError, ValueError):
        return ["-", "-", "-"]
    shown = time.localtime(start)
    same_day = time.localtime(now)[:3] == shown[:3]
    started = time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M", shown)
    end = now if run.get("status") in ACTIVE else None
    if run.get("ended_at"):
        try:
            end = parse_iso(str(run["ended_at"]))
        except ValueError:
            end = None
    code = run.get("code") if run.get("status") in TERMINAL else None
    return [started, "-" if end is None else duration(end - start), "-" if code is None else str(code)]


def duration(seconds: float) -> str:
    """`0.4s`, `12s`, `3m05s`, `2h03m`, `3d04h`: two units at most, never negative."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    for unit, size, small, small_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if whole >= size:
            return f"{whole // size}{unit}{(whole % size) // small_size:02d}{small}"
    return f"{whole}s"


COMMAND_WIDTH = 40


def _with_progress_damage(run: Any, progress: Mapping[str, Any]) -> Any:
    """An active run's listing with its damaged progress.json named (`(damaged:
    progress.json)`), unless a file the status rests on is damaged already."""
    if "damaged" not in progress or run.get("damaged"):
        return run
    return {**run, "damaged": progress["damaged"], "damaged_file": "progress.json"}


def _what(run: Mapping[str, Any]) -> str:
    """What a run runs: its recipe or tool, else (an inline template) its command."""
    return str(
        run.get("recipe") or run.get("tool") or short(run.get("command"), COMMAND_WIDTH) or "-"
    )


def _tree_lines(root: StateRoot, runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Runs with their child runs nested beneath and each fan-out's branches (live from
    progress.json, a finished one's from result.json), newest first like `ls`, in
    aligned columns."""
    listed = {r["run"] for r in runs}
    children: dict[str, list[dict[str, Any]]] = {}
    tops = []
    for r in runs:
        parent = str(r.get("parent") or "")
        if parent.startswith("run:") and parent[4:] in listed:
            children.setdefault(parent[4:], []).append(dict(r))
        else:
            tops.append(dict(r))
    now = time.time()
    rows: list[list[str]] = []

    def walk(r: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        joint = "" if top else ("└─ " if last else "├─ ")
        branches: dict[str, Any] = {}
        if r.get("status") in ACTIVE:
            progress = read_progress(root.run(r["run"]))
            branches = progress.get("branches") or {}
            r = _with_progress_damage(r, progress)
        elif r.get("status") in TERMINAL:
            branches = _finished_branches(root, r["run"])
        rows.append([f"{prefix}{joint}{r['run']}", status_word(r), *_timing(r, now), _what(r)])
        inner = prefix + ("" if top else ("   " if last else "│  "))
        kids = children.get(r["run"], [])
        for label, state in branches.items():
            rows.append([f"{inner}  · {label}", str(state)])
        for index, kid in enumerate(kids):
            walk(kid, inner, index == len(kids) - 1, False)

    for r in tops:
        walk(r, "", True, True)
    width = max(len(row) for row in rows)
    table = padded([row + [""] * (width - len(row)) for row in rows], ["", *([""] * (width - 1))])
    return ["".join(cells) for cells in table[1:]]


def _finished_branches(root: StateRoot, run_id: str) -> dict[str, str]:
    """A finished run's parallel branches, label -> status, from result.json's nodes."""
    from runtime.core.errors import ActorsError
    from runtime.views.status import read_result

    try:
        result: Mapping[str, Any] = read_result(root.run(run_id)) or {}
    except (ActorsError, OSError):
        return {}
    nodes = [n for n in result.get("nodes") or [] if isinstance(n, dict)]
    parallel = {str(n.get("id")) for n in nodes if n.get("kind") == "parallel"}
    found = sorted(
        (str(n.get("id")), str(n.get("label") or n.get("id")), str(n.get("status")))
        for n in nodes
        if str(n.get("id")).rpartition(".")[0] in parallel
    )
    return {label: status for _, label, status in found}


def status_view(
    run: str | None = None,
    *,
    line: bool = False,
    session: str | None = None,
    as_json: bool = False,
    stdin: bool = False,
    then: str | None = None,
) -> None:
    """The body of `actors status`: one run in detail, or this session's active work."""
    from runtime.views.status import find_run, shown_status

    root = StateRoot.from_env()
    if line or stdin or then is not None:
        _print_status_line(root, session, stdin=stdin, then=then)
        return
    if run is None:
        raise BadInput("which run?", hint="actors status RUN, or actors status --line")
    paths, record = find_run(root, parse_run_ref(run))
    summary: dict[str, Any] = dict(shown_status(paths, record))
    if as_json:
        emit_json(summary)
        return
    details = [
        ("recipe", _what(summary)),
        ("age", age(summary.get("created_at"))),
        ("steps", steps_line(summary)),
    ]
    if summary.get("branches"):
        details.append(("branches", ", ".join(f"{k}={v}" for k, v in summary["branches"].items())))
    details += [("owner", summary.get("owner_id") or "-"), ("state", summary["state_dir"])]
    write_line(summary_parts(summary))
    lines = [f"  {key:<9}{cell(value)}" for key, value in details]
    if summary.get("status") == "failed" or summary.get("degraded"):
        lines += _failure(paths, record)
    _out("\n".join(lines))


def _failure(paths: Any, record: Any) -> list[str]:
    """The failing command, exit code and stderr tail from result.json (secrets masked)."""
    from actors.cli._format import failure_lines
    from runtime.compiler.redact import redact_deep, run_secrets
    from runtime.views.status import read_result

    try:
        result: Mapping[str, Any] = read_result(paths) or {}
    except ActorsError:
        return []  # a damaged result.json: the status line already says so
    return failure_lines(redact_deep(result.get("failure"), run_secrets(record)))


def _print_status_line(
    root: StateRoot, session: str | None, *, stdin: bool, then: str | None
) -> None:
    """`status --line`, as a harness's status line runs it: with `--stdin`, the session is
    the `session_id` of the JSON the harness writes there (Claude Code's status line
    input); with `--then CMD`, CMD (the user's own status line, run by `sh -c` as Claude
    Code runs it) gets the same input, and ours is appended to its last line."""
    data = _status_input() if stdin or then is not None else b""
    if stdin and session is None:
        session = _input_session(data)
    ours = _status_line(root, session)
    theirs = _run_theirs(then, data) if then is not None else ""
    text = "  ".join(part for part in (theirs, ours) if part)
    if text:
        _out(text)


def _status_input() -> bytes:
    """The harness's status-line JSON, bounded in size and in time as a hook's input is
    (actors.cli.hooks.read_stdin): a stdin that stays open and silent once held the line,
    and its harness, forever; it now counts as no input after ACTORS_HOOK_LOCK_WAIT."""
    from actors.cli.hooks import read_stdin
    from runtime.core import config
    from runtime.core.bounded_json import MAX_INPUT_BYTES

    try:
        wait = config.seconds(config.HOOK_LOCK_WAIT)
    except Exception:  # a bad value: the default (a status line never fails)
        wait = float(config.HOOK_LOCK_WAIT.default)
    try:
        data = read_stdin(MAX_INPUT_BYTES + 1, wait)
    except OSError:  # no stdin at all (closed descriptor): no input
        return b""
    return data or b""


def _input_session(data: bytes) -> str | None:
    """The `session_id` of a harness's status-line JSON; None when absent or unusable (the
    line then falls back to $ACTORS_SESSION: a status line must never fail)."""
    from runtime.core.bounded_json import INPUT_DEPTH, MAX_INPUT_BYTES, Undecodable, decode
    from runtime.core.ids import is_valid_id

    try:
        found = decode(data or b"{}", max_bytes=MAX_INPUT_BYTES, max_depth=INPUT_DEPTH)
    except Undecodable:
        return None
    session = found.get("session_id") if isinstance(found, dict) else None
    return session if isinstance(session, str) and is_valid_id(session) else None


def _run_theirs(command: str, data: bytes) -> str:
    """The user's status line command's output (trailing newline off), or "" on failure."""
    import subprocess

    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command], input=data, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode(errors="replace").rstrip("\n")


def _status_line(root: StateRoot, session: str | None) -> str:
    """One ▷ per active work unit of this session, a ▶ stepping across them each second."""
    from runtime.runs.ownership import current_principal
    from runtime.views.index import list_runs

    me = current_principal(root, session).id
    units = 0
    for r in list_runs(root):
        if r.get("status") in ACTIVE and r.get("owner_id") == me:
            units += max(1, int(read_progress(root.run(r["run"])).get("active") or 0))
    if not units:
        return ""
    shown = min(units, MAX_MARKS)
    marks = ["▷"] * shown
    marks[int(time.time()) % shown] = "▶"
    return "".join(marks) + (f" +{units - shown}" if units > shown else "")


MAX_MARKS = 100
"""The most ▷ `status --line` draws; more units are counted after them (`+N`)."""

"""Compact, human-first rendering of run state (machines use --json).

Click-free, like actors.cli._fast, which prints through it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.core.ids import parse_iso
from runtime.core.terminal import cell


def age(ts: str | None, now: float | None = None) -> str:
    if not ts:
        return "-"
    try:
        seconds = max(0.0, (now or time.time()) - parse_iso(str(ts)))
    except ValueError:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def status_word(summary: Mapping[str, Any]) -> str:
    """The status as a listing shows it: `failed (3)`, `done (degraded)`, and the file
    of a damaged run named, `(damaged: run.json)` or `running (damaged: progress.json)`."""
    word = cell(summary.get("status", "?"))
    if summary.get("degraded"):
        word += " (degraded)"
    if word == "failed" and summary.get("code") not in (None, 1):
        word += f" ({cell(summary['code'])})"
    if summary.get("damaged"):
        damage = f"(damaged: {cell(summary.get('damaged_file') or 'run.json')})"
        word = damage if word == "damaged" else f"{word} {damage}"
    return word


def table(rows: list[list[str]], headers: list[str]) -> str:
    return "\n".join("".join(line).rstrip() for line in padded(rows, headers))


def padded(rows: list[list[str]], headers: list[str]) -> list[list[str]]:
    """The header and every row as cells padded to their column's width (with the two
    spaces between columns), for a caller that colours some of them. Every cell is
    escaped (`cell`): a newline in a recipe's file name cannot forge a row."""
    rows = [[cell(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    out = []
    for row in [headers, *rows]:
        cells = [c.ljust(w) + "  " for c, w in zip(row, widths, strict=True)]
        while len(cells) > 1 and not cells[-1].strip():
            cells.pop()  # no trailing blanks: empty last columns are left out
        cells[-1] = cells[-1].rstrip()
        out.append(cells)
    return out


def emit_json(data: Any) -> None:
    """A record indented; a list one compact item per line (still one JSON document, and
    `grep`-able): indenting 10,000 runs takes json's pure-Python path, ~1 s, while the
    compact form goes through its C encoder (~50 ms)."""
    if isinstance(data, list):
        encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
        items = ",\n".join(encode(item) for item in data)
        sys.stdout.write(f"[\n{items}\n]\n" if items else "[]\n")
    else:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


STATUS_COLOURS = {
    "done": "green",
    "failed": "red",
    "killed": "red",
    "exited": "red",
    "damaged": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "queued": "cyan",
    "starting": "cyan",
    "running": "cyan",
}

Part = str | tuple[str, str]
"""Text, or (text, colour name): a piece of a line `write_line` prints."""


def painted(summary: Mapping[str, Any], text: str | None = None) -> Part:
    """The status word (or `text`) in its status's colour."""
    colour = STATUS_COLOURS.get(str(summary.get("status")))
    word = status_word(summary) if text is None else text
    return (word, colour) if colour else word


def write_line(parts: Sequence[Part], *, err: bool = False) -> None:
    """One line of `parts`; the coloured ones in colour only on a terminal (the stream is
    then actors.cli's TerminalStream) and only when NO_COLOR is not set."""
    from runtime.core import config

    stream = sys.stderr if err else sys.stdout
    styled = None if config.flag(config.NO_COLOR) else getattr(stream, "styled", None)
    for part in parts:
        if isinstance(part, str):
            stream.write(part)
        elif styled is not None:
            styled(*part)
        else:
            stream.write(part[0])
    stream.write("\n")
    stream.flush()


def summary_parts(summary: Mapping[str, Any]) -> list[Part]:
    parts: list[Part] = [f"run:{cell(summary['run'])}  ", painted(summary)]
    if summary.get("reason") and summary.get("status") not in ("done", "running"):
        parts.append(f"  - {cell(summary['reason'])}")
    if summary.get("damaged") and summary.get("status") != "damaged":
        parts.append(f"  - damaged: {cell(summary['damaged'])}")
    return parts


def summary_line(summary: Mapping[str, Any]) -> str:
    return "".join(p if isinstance(p, str) else p[0] for p in summary_parts(summary))


def failure_lines(failure: Mapping[str, Any] | None, indent: str = "  ") -> list[str]:
    """Why a run failed, for `result` and `status`: the failing command (secrets masked
    at the source), its exit code and its stderr's last lines (bounded when recorded),
    every run-written character made inert whether or not the output is a terminal."""
    if not failure or not failure.get("command"):
        return []
    from runtime.core.terminal import inert, one_line  # deferred: only failures need it

    name = failure.get("label")
    lines = [
        f"{indent}command  {one_line(str(failure['command']))}"
        + (f"  ({one_line(str(name))})" if name else ""),
        f"{indent}exit     {failure.get('exit_code', failure.get('code'))}"
        + (
            f"  ({one_line(str(failure.get('reason')))})"
            if failure.get("status") == "timeout"
            else ""
        ),
    ]
    tail = str(failure.get("stderr_tail") or "").rstrip("\n")
    if tail:
        cut = " (last lines)" if failure.get("stderr_cut") else ""
        lines.append(f"{indent}stderr{cut}:")
        lines += [f"{indent}  {inert(line, keep=chr(9))}" for line in tail.split("\n")]
    return lines


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


class ProgressLine:
    """One line on stderr, redrawn in place while a command blocks (`wait`, `inbox
    wait`, `run`, `spawn --wait`), only when stderr is a terminal: an agent reading a pipe
    never gets it. `clear` wipes it before anything else is printed."""

    def __init__(self) -> None:
        self.live = stderr_is_tty()
        self.shown = 0

    def show(self, text: str) -> None:
        if not self.live:
            return
        import shutil

        text = text[: max(10, shutil.get_terminal_size((80, 24)).columns - 1)]
        sys.stderr.write("\r" + text.ljust(self.shown))
        sys.stderr.flush()
        self.shown = len(text)

    def clear(self) -> None:
        if self.live and self.shown:
            sys.stderr.write("\r" + " " * self.shown + "\r")
            sys.stderr.flush()
            self.shown = 0


def print_started(record: Mapping[str, Any], as_json: bool, **extra: Any) -> None:
    """A detached run was started: its address (and how to follow it), or JSON."""
    if as_json:
        keys = ("run", "address", "state_dir", "pid")
        emit_json({**{k: record[k] for k in keys}, **extra})
        return
    sys.stdout.write(record["address"] + "\n")
    sys.stdout.flush()
    if extra.get("status") == "queued":
        sys.stderr.write(f"  queued: waits for {cell(str(extra.get('waiting_for')))}\n")
    elif stderr_is_tty():
        sys.stderr.write(f"  started; follow with: actors tail {record['run']} -f\n")


DESCRIPTION_WIDTH = 60


def short(text: str | None, width: int = DESCRIPTION_WIDTH) -> str:
    """`text` on one line, cut to `width` with an ellipsis (controls escaped: `cell`)."""
    line = cell(" ".join(str(text or "").split()))
    return line if len(line) <= width else line[: width - 3] + "..."


def param_lines(params: list[Any], indent: str = "    ") -> list[str]:
    if not params:
        return [f"{indent}(none)"]
    rows = []
    for p in params:
        if p.required:
            need = "required"
        elif p.has_default:
            need = f"default {_default_text(p.default)}"
        else:
            need = "optional"
        rows.append([f"--{p.name}", p.describe_type(), need, short(p.description, 50)])
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return [
        (
            indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[3]
        ).rstrip()
        for r in rows
    ]


def _default_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)

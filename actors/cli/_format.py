"""Compact, human-first rendering of run state (machines use --json).

Click-free, like actors.cli._fast, which prints through it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from typing import Any

from runtime.core.ids import parse_iso


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
    word = str(summary.get("status", "?"))
    if summary.get("degraded"):
        word += " (degraded)"
    if summary.get("damaged"):
        word += " (damaged)"
    if word == "failed" and summary.get("code") not in (None, 1):
        word += f" ({summary['code']})"
    return word


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


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


def summary_line(summary: Mapping[str, Any]) -> str:
    parts = [f"run:{summary['run']}", status_word(summary)]
    if summary.get("reason") and summary.get("status") not in ("done", "running"):
        parts.append(f"- {summary['reason']}")
    if summary.get("damaged") and summary.get("status") != "damaged":
        parts.append(f"- damaged: {summary['damaged']}")
    return "  ".join(parts)


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


def print_started(record: Mapping[str, Any], as_json: bool, **extra: Any) -> None:
    """A detached run was started: its address (and how to follow it), or JSON."""
    if as_json:
        keys = ("run", "address", "state_dir", "pid")
        emit_json({**{k: record[k] for k in keys}, **extra})
        return
    sys.stdout.write(record["address"] + "\n")
    sys.stdout.flush()
    if stderr_is_tty():
        sys.stderr.write(f"  started; follow with: actors tail {record['run']} -f\n")


DESCRIPTION_WIDTH = 60


def short(text: str | None, width: int = DESCRIPTION_WIDTH) -> str:
    """`text` on one line, cut to `width` with an ellipsis."""
    line = " ".join((text or "").split())
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

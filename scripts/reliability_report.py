"""Run the reliability suites and render docs/reliability.md from what they observed.

    python scripts/reliability_report.py            # the normal tier (as `make test`)
    python scripts/reliability_report.py --slow     # also the long soak variants

Each reliability test records a row (suite, fault or attack, trials, what was observed)
through tests/reliability/_report.py once its assertions have passed; this script points
them at a temporary file with ACTORS_RELIABILITY_REPORT, runs
`pytest tests/reliability -p no:cacheprovider -q`, and writes the table, the pass counts
per test file, the date and the machine. The figures are those of the last run: the file
is never edited by hand. Exits with pytest's status.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reliability_promises import THREAT_MODEL, render_promises

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "docs" / "reliability.md"


def run_suites(rows_file: Path, junit: Path, slow: bool) -> tuple[int, float]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/reliability",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--junitxml={junit}",
    ]
    if slow:
        argv += ["-m", "slow or not slow"]
    env = dict(os.environ, ACTORS_RELIABILITY_REPORT=str(rows_file))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    started = time.monotonic()
    code = subprocess.run(argv, cwd=REPO, env=env, check=False).returncode
    return code, time.monotonic() - started


def outcomes(
    junit: Path,
) -> tuple[dict[str, Counter[str]], list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Per test file: passed / failed / skipped / xfailed counts; the expected failures
    (known bugs) with their reasons; and every case as (file, test name, outcome)."""
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    known: list[tuple[str, str]] = []
    cases: list[tuple[str, str, str]] = []
    if not junit.exists():
        return per_file, known, cases
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1]
        children = {child.tag for child in case}
        skipped = case.find("skipped")
        if "failure" in children or "error" in children:
            outcome = "failed"
        elif skipped is not None:
            xfail = skipped.get("type") == "pytest.xfail"
            outcome = "xfailed" if xfail else "skipped"
            if xfail:
                reason = (skipped.get("message") or "").removeprefix("reason: ")
                known.append((f"{name}::{case.get('name')}", reason))
        else:
            outcome = "passed"
        per_file[name][outcome] += 1
        cases.append((name, case.get("name", ""), outcome))
    return per_file, known, cases


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(
    rows: list[dict[str, Any]],
    per_file: dict[str, Counter[str]],
    known: list[tuple[str, str]],
    cases: list[tuple[str, str, str]],
    code: int,
    seconds: float,
    slow: bool,
) -> str:
    totals: Counter[str] = Counter()
    for counts in per_file.values():
        totals.update(counts)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = (
        f"{os.cpu_count()} cores, {platform.machine()}, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )
    outcome = ", ".join(f"{n} {k}" for k, n in sorted(totals.items())) or "no tests ran"
    lines = [
        "# Reliability",
        "",
        "What this project was put through to show that nothing is lost, doubled or leaked",
        "under faults, load and bad input, and what was observed. Every row below is written",
        "by a test in `tests/reliability/` after its assertions passed, so the table only",
        "ever describes trials that held; the figures are those of the last run.",
        "",
        "Crash points are reached with the fault hook (`ACTORS_PAUSE_AT`, runtime/core/faults.py):",
        "the real process stops at a named step of its write sequence and is SIGKILLed there.",
        "Known bugs that a test demonstrates but that are not fixed yet are run as expected",
        "failures and listed at the end.",
        "",
        "Regenerate (never edit this file by hand):",
        "",
        "```",
        "python scripts/reliability_report.py           # normal tier, as in `make test`",
        "python scripts/reliability_report.py --slow    # plus the long soak variants",
        "```",
        "",
        f"- Date: {now}",
        f"- Machine: {machine}",
        f"- Tier: {'normal and slow (soak)' if slow else 'normal (soak variants not run)'}",
        f"- Result: {outcome} in {seconds:.0f} s (pytest exit status {code})",
        f"- Suites: {', '.join(sorted({r['suite'] for r in rows})) or 'none recorded'}",
        "",
        THREAT_MODEL,
        *render_promises(cases),
    ]
    by_suite: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in sorted(rows, key=lambda r: r.get("ts", 0)):
        by_suite[row["suite"]].append(row)
    for suite, suite_rows in by_suite.items():
        lines += [
            f"## {suite[:1].upper() + suite[1:]}",
            "",
            "| Fault / attack | Trials | Observed |",
            "|---|---:|---|",
        ]
        lines += [
            f"| {_cell(r['fault'])} | {r['trials']} | {_cell(r['observed'])} |" for r in suite_rows
        ]
        lines.append("")
    lines += [
        "## Tests by file",
        "",
        "| File | Passed | Failed | Skipped | Expected failures (known bugs) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, counts in sorted(per_file.items()):
        lines.append(
            f"| `tests/reliability/{name}.py` | {counts['passed']} | {counts['failed']} | "
            f"{counts['skipped']} | {counts['xfailed']} |"
        )
    lines.append("")
    if known:
        lines += ["## Known bugs (expected failures)", "", "| Test | Bug |", "|---|---|"]
        grouped: dict[tuple[str, str], int] = Counter(
            (test.split("[", 1)[0], reason) for test, reason in known
        )
        for (test, reason), cases in grouped.items():
            label = f"`{_cell(test)}`" + (f" ({cases} cases)" if cases > 1 else "")
            lines.append(f"| {label} | {_cell(reason)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--slow", action="store_true", help="also run the soak variants")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="actors-reliability-") as tmp:
        rows_file, junit = Path(tmp) / "rows.jsonl", Path(tmp) / "junit.xml"
        rows_file.touch()
        code, seconds = run_suites(rows_file, junit, args.slow)
        rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
        per_file, known, cases = outcomes(junit)
        text = render(rows, per_file, known, cases, code, seconds, args.slow)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output} ({len(rows)} rows)")
    return code


if __name__ == "__main__":
    sys.exit(main())

"""docs/adapters.md's level table is generated (scripts/adapters_report.py) from what the
doctor tests observed: the page carries it, and hostile doctor text cannot break it."""

from __future__ import annotations

import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import adapters_report


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "harness": "codex", "transport": "rpc <socket>", "declared_level": "D7",
        "version": "codex 1.0", "setup": "", "pin": "", "test": "tests/x.py::t",
        "verdicts": {f"D{n}": "pass" for n in range(9)}, "reasons": {},
    }  # fmt: skip
    row.update(over)
    return row


def test_the_page_carries_a_generated_table_for_every_probed_harness() -> None:
    text = (REPO / "docs" / "adapters.md").read_text()
    block = text.split(adapters_report.BEGIN, 1)[1].split(adapters_report.END, 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("| ") and "---" not in line]
    harnesses = {line.split("|")[1].strip() for line in rows[1:]}
    assert {"file", "tmux", "webhook", "claude_code", "opencode", "codex", "pi"} <= harnesses
    assert all(line.count("|") == rows[0].count("|") for line in rows), "a row broke its columns"


def test_hostile_doctor_text_stays_in_its_cell() -> None:
    hostile = _row(
        verdicts={**_row()["verdicts"], "D4": "fail"},  # type: ignore[dict-item]
        reasons={"D4": "a | b <script>alert(1)</script>"},
        setup="-o x=|y",
    )
    table = adapters_report.render([hostile], {}, "now")
    assert "<script>" not in table and "&lt;script&gt;" in table
    line = next(row for row in table.splitlines() if row.startswith("| codex"))
    assert line.count("|") - line.count("\\|") == 16  # 15 columns, none added by the text


def test_wake_figures_go_only_to_the_benched_pin_and_setup() -> None:
    wake = {"codex": {"median_ms": 70.0, "p99_ms": 130.0, "baseline_median_ms": 5.0}}
    rows = [_row(), _row(pin="old", version="codex 0.9"), _row(setup="-o messaging=socket")]
    lines = [r for r in adapters_report.render(rows, wake, "now").splitlines() if "| codex" in r]
    assert ["70.0 ms" in line for line in lines] == [True, False, False]

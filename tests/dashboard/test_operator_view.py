"""What an operator who keeps the dashboard open sees (issue 31), in a real Chromium:
the numbers `actors status` prints, a degraded run said so with why, a live tail that
follows the end with timestamps and a search, dialogs whose buttons say what they do,
deliveries shown with their run and inside their card, and a run page with durations,
retries and the run's own result line.

Each test failed on 4ee217d: the progress column read `0 done` for every finished run,
a degraded run showed a plain `done` badge and `reason undefined`, the tail stayed at
its top, the cancel dialog said [Cancel] [Confirm], deliveries were a bare ULID.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runtime.store.layout import StateRoot
from tests.actors.test_numbers_agree import three_leaves
from tests.conftest import cli, finished, make_fifo, read_fifo_line, write_recipe
from tests.dashboard.conftest import Server, screenshot
from tests.dashboard.test_browser import WAIT_MS, open_live, row, spawn

CLOCK = re.compile(r"^≤?\d\d:\d\d:\d\d$")


def run_page(page: Any, dashboard: Server, run: str) -> None:
    open_live(page, dashboard.url)
    page.goto(f"{dashboard.base}/#/run/{run}")
    page.wait_for_selector(f'#run-id:text-is("{run}")', timeout=WAIT_MS)


def degraded_run(tmp_path: Path) -> dict[str, Any]:
    """A parallel group whose one branch fails with `failure: branch`: done, degraded."""
    recipe = {
        "parallel": True,
        "template": [
            {"label": "alpha", "template": "echo alpha"},
            {
                "label": "gamma",
                "failure": "branch",
                "template": "sh -c 'echo no route >&2; exit 3'",
            },
        ],
    }
    record = spawn(str(write_recipe(tmp_path, "fan", recipe)))
    end = finished(record)
    assert (end["status"], end["degraded"]) == ("done", True)
    return record


def test_the_runs_page_counts_steps_as_status_does(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    run = three_leaves(tmp_path)["run"]
    open_live(page, dashboard.url)
    page.wait_for_selector(row(run), timeout=WAIT_MS)
    steps = page.text_content(f"{row(run)} td.progress") or ""
    assert steps.strip() == "2 done, 1 failed (1 timed out) · 1 retry"
    status = json.loads(cli("status", "--json", run).stdout)  # the same numbers
    assert (status["completed"], status["failed"], status["timed_out"]) == (2, 1, 1)
    assert status["retries"] == 1
    took = (page.text_content(f"{row(run)} td.duration") or "").strip()
    assert re.fullmatch(r"\d+(\.\d)?s", took), took  # the run's own duration, not "-"
    degraded = degraded_run(tmp_path)["run"]
    live = spawn("-t", "sleep 300")["run"]
    page.wait_for_selector(f'{row(live)}[data-status="running"]', timeout=WAIT_MS)
    page.wait_for_selector(row(degraded), timeout=WAIT_MS)
    screenshot(page, "runs")  # a running, a degraded and a failed run, as docs show them
    cli("kill", live)


def test_a_degraded_run_says_so_and_why(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    run = degraded_run(tmp_path)["run"]
    open_live(page, dashboard.url)
    page.wait_for_selector(row(run), timeout=WAIT_MS)
    assert page.text_content(f"{row(run)} .status") == "done (degraded)"
    page.goto(f"{dashboard.base}/#/run/{run}")
    page.wait_for_selector('section[data-box="result"]', timeout=WAIT_MS)
    assert page.text_content("#run-status") == "done (degraded)"
    card = page.text_content('section[data-box="result"]') or ""
    assert "undefined" not in card and "null" not in card
    failed = page.locator('table.failures tr[data-node="1.2"] td').all_text_contents()
    assert failed == ["gamma", "failed", "3", "branch", "exit code 3"]
    assert "no route" in (page.text_content(".failure pre.stderr") or "")


def test_the_live_tail_follows_the_end_with_timestamps_and_search(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    ready = make_fifo(tmp_path / "ready.fifo")
    # one FIFO per step: reopening one FIFO can meet the test's previous writer, still
    # open between its write and its close, and read its EOF as the next step (CI saw
    # tick 82 written early and the test then block on a FIFO nobody would read)
    more, last = make_fifo(tmp_path / "more.fifo"), make_fifo(tmp_path / "last.fifo")
    script = (
        "i=0; while [ $i -lt 80 ]; do i=$((i+1)); echo tick $i; done; "
        f"echo up > {ready}; read x < {more}; echo tick 81; read x < {last}; echo tick 82; "
        "exec sleep 300"
    )
    record = spawn("-t", f"sh -c '{script}'")
    assert read_fifo_line(ready) == "up"
    run_page(page, dashboard, record["run"])
    page.wait_for_selector('#tail .line .text:text-is("tick 80")', timeout=WAIT_MS)

    def at_end() -> bool:
        box = "document.getElementById('tail')"
        return bool(
            page.evaluate(
                f"{box}.scrollHeight > {box}.clientHeight && "
                f"{box}.scrollTop + {box}.clientHeight >= {box}.scrollHeight - 4"
            )
        )

    assert at_end()  # the newest line is on screen, not tick 1-17
    stamps = page.locator("#tail .line .ts").all_text_contents()
    assert len(stamps) == 80 and all(CLOCK.match(s) for s in stamps), stamps[:3]

    with open(more, "w") as fifo:  # the run goes on: one more line, pushed live
        fifo.write("go\n")
    page.wait_for_selector('#tail .line .text:text-is("tick 81")', timeout=WAIT_MS)
    assert at_end()
    newest = page.locator("#tail .line").last
    assert CLOCK.match(newest.locator(".ts").text_content() or "")
    assert not (newest.locator(".ts").text_content() or "").startswith("≤")  # seen live

    from playwright.sync_api import expect

    page.evaluate("document.getElementById('tail').scrollTop = 0")  # the reader scrolls up
    expect(page.locator("#tail-follow")).not_to_be_checked(timeout=WAIT_MS)
    with open(last, "w") as fifo:
        fifo.write("go\n")
    page.wait_for_selector('#tail .line .text:text-is("tick 82")', timeout=WAIT_MS)
    assert page.evaluate("document.getElementById('tail').scrollTop") == 0  # kept their place
    page.check("#tail-follow")
    assert at_end()

    page.fill("#tail-search", "tick 4")
    shown = [t for t in page.locator("#tail .line:visible .text").all_text_contents()]
    assert shown == ["tick 4", *(f"tick {n}" for n in range(40, 50))]
    assert page.text_content("#tail-count") == "11 of 82 lines"
    screenshot(page, "tail")
    cli("kill", record["run"])


def test_the_cancel_dialog_says_what_each_button_does(
    dashboard: Server, page: Any, home: StateRoot
) -> None:
    record = spawn("-t", "sleep 300")
    open_live(page, dashboard.url)
    page.wait_for_selector(f'{row(record["run"])}[data-status="running"]', timeout=WAIT_MS)
    page.click(f'{row(record["run"])} button[data-action="cancel"]')
    assert page.text_content("#confirm-yes") == "Cancel run"
    assert page.text_content("#confirm-no") == "Keep running"
    assert record["run"] in (page.text_content("#confirm-text") or "")
    screenshot(page, "cancel")
    page.click("#confirm-no")
    assert json.loads(cli("status", "--json", record["run"]).stdout)["status"] == "running"
    page.click(f'{row(record["run"])} button[data-action="kill"]')
    assert (page.text_content("#confirm-yes"), page.text_content("#confirm-no")) == (
        "Kill run",
        "Keep running",
    )
    page.click("#confirm-no")
    page.click(f'{row(record["run"])} button[data-action="cancel"]')
    page.click("#confirm-yes")
    page.wait_for_selector(f'{row(record["run"])}[data-status="cancelled"]', timeout=WAIT_MS)
    assert finished(record)["status"] == "cancelled"


def test_deliveries_show_their_run_and_fit_their_card(
    dashboard: Server, chromium: Any, home: StateRoot
) -> None:
    runs = [spawn("-t", "sh -c 'exit 5'") for _ in range(2)]
    for record in runs:
        assert finished(record)["status"] == "failed"
    context = chromium.new_context(viewport={"width": 760, "height": 640})
    try:
        page = context.new_page()
        open_live(page, dashboard.url)
        page.goto(f"{dashboard.base}/#/sessions")
        page.wait_for_selector("table.deliveries tr[data-delivery]", timeout=WAIT_MS)
        shown = page.locator("table.deliveries td.run a").all_text_contents()
        assert sorted(shown) == sorted(r["run"] for r in runs)
        page.click(f'table.deliveries td.run a:text-is("{runs[0]["run"]}")')
        page.wait_for_selector(f'#run-id:text-is("{runs[0]["run"]}")', timeout=WAIT_MS)
        page.go_back()
        page.wait_for_selector("table.deliveries tr[data-delivery]", timeout=WAIT_MS)
        overflow = page.evaluate(
            "[...document.querySelectorAll('section[data-session]')]"
            ".map(s => s.scrollWidth - s.clientWidth)"
        )
        assert overflow and max(overflow) <= 0, overflow
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        context.close()


HOSTILE = "total 45 <b>x</b>\x1b[31m"


def test_the_run_page_shows_durations_retries_and_its_result_line(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    marker = tmp_path / "tried-once"
    recipe = {
        "template": [
            {
                "label": "fetch",
                "template": (
                    f"sh -c 'test -e {marker} || {{ touch {marker}; echo first try >&2; exit 3; }};"
                    " echo fetched'"
                ),
                "retry": 2,
                "recover": "true",
            },
            {"label": "sum", "template": f"printf 'adding\\n{HOSTILE}\\n'"},
        ]
    }
    record = spawn(str(write_recipe(tmp_path, "adder", recipe)))
    assert finished(record)["status"] == "done"
    run_page(page, dashboard, record["run"])
    line = page.text_content("#result-line code") or ""
    assert line == "total 45 <b>x</b>\\x1b[31m"  # the last line, as text, escaped
    assert page.evaluate("document.querySelectorAll('#result-line b').length") == 0
    assert re.search(r"took \d+(\.\d)?s", page.text_content("#run-duration") or "")
    assert page.text_content("#run-steps") == " · 2 done · 1 retry"
    from playwright.sync_api import expect

    rows = page.locator("table.steps tr[data-command]")
    expect(rows).to_have_count(4)  # fetch, its recover, fetch again, sum
    attempts = [c.strip() for c in page.locator("table.steps td.attempt").all_text_contents()]
    assert attempts == ["1", "recover", "retry 1 (attempt 2)", "1"]
    durations = page.locator("table.steps tr[data-command] td:nth-child(6)").all_text_contents()
    assert all(re.fullmatch(r"\d+(\.\d)?s", d) for d in durations), durations
    card = page.locator('section[data-box="result"] table.kv')
    assert card.locator('tr[data-key="duration"] td').text_content()
    assert card.locator('tr[data-key="steps"] td').text_content() == "2 done · 1 retry"
    assert "undefined" not in (page.text_content('section[data-box="result"]') or "")

    # each step's own log folds out, as a GitHub Actions step does
    first, last = rows.nth(0), rows.nth(3)
    first.locator('button[data-action="log"]').click()
    log = page.locator('tr.step-log[data-log="command-001"]')
    expect(log.locator("pre.stderr")).to_have_text("first try", timeout=WAIT_MS)
    last.locator('button[data-action="log"]').click()
    log = page.locator('tr.step-log[data-log="command-004"] pre.stdout')
    expect(log).to_have_text(f"adding\n{HOSTILE}", timeout=WAIT_MS)  # as text
    assert page.evaluate("document.querySelectorAll('#view b').length") == 0
    first.locator('button[data-action="log"]').click()  # folded back
    expect(page.locator('tr.step-log[data-log="command-001"]')).to_have_count(0)
    screenshot(page, "run", full_page=True)  # the sum step's log folded out
    for name, refused in (("run.json", 400), ("..%2F..%2Frun.json", 404)):
        status = page.evaluate(
            f"fetch('/api/runs/{record['run']}/commands/{name}').then(r => r.status)"
        )
        assert status == refused, name  # only a command id names a capture

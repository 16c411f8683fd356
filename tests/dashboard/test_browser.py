"""The dashboard in a real headless Chromium: the page a user opens from the printed URL.

Live updates are proven by a marker the test leaves on the page's window: it survives
only if the page was never reloaded. A kill from the page is proven on the processes:
the run's whole session (process group and all) is gone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.core.process import session_members, wait_gone
from runtime.store.layout import StateRoot
from runtime.views.status import load_run
from tests.conftest import cli, finished, make_fifo, read_fifo_line, write_recipe
from tests.dashboard.conftest import Server, screenshot

WAIT_MS = 15_000


def spawn(*args: str) -> dict[str, Any]:
    done = cli("spawn", "--json", *args)
    assert done.returncode == 0, done.stderr
    record: dict[str, Any] = json.loads(done.stdout)
    return record


def row(run: str) -> str:
    return f'tr[data-run="{run}"]'


def mark(page: Any) -> None:
    page.evaluate("window.__not_reloaded = true")


def not_reloaded(page: Any) -> bool:
    return bool(page.evaluate("window.__not_reloaded === true"))


def open_live(page: Any, url: str) -> None:
    """Open the printed URL and wait until the page's event stream is up."""
    page.goto(url)
    page.wait_for_selector("#live.on", timeout=WAIT_MS)


def test_the_page_loads_with_the_token_and_refuses_without(dashboard: Server, page: Any) -> None:
    refused = page.goto(dashboard.base + "/")
    assert refused is not None and refused.status == 403
    assert "token" in page.content()
    open_live(page, dashboard.url)
    assert page.url == dashboard.base + "/"  # the token left the address bar for a cookie
    assert page.text_content("#empty") == "no runs"
    assert (page.text_content("#me code") or "").startswith("user:")  # as the CLI would act


def test_a_run_spawned_from_the_cli_appears_then_a_kill_from_the_page_kills_it(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    open_live(page, dashboard.url)
    mark(page)
    ready = make_fifo(tmp_path / "ready.fifo")
    record = spawn("-t", f"sh -c 'sleep 300 & echo up > {ready}; sleep 300; wait'")
    page.wait_for_selector(f'{row(record["run"])}[data-status="running"]', timeout=WAIT_MS)
    assert not_reloaded(page)
    assert read_fifo_line(ready) == "up"
    sid = load_run(home.run(record["run"]))["process_identity"]["sid"]
    assert len(session_members(sid)) >= 3  # the runner, sh and its background sleep

    page.click(f'{row(record["run"])} button[data-action="kill"]')
    assert page.is_visible("#confirm")
    assert record["run"] in (page.text_content("#confirm-text") or "")
    page.click("#confirm-yes")
    page.wait_for_selector(f'{row(record["run"])}[data-status="killed"]', timeout=WAIT_MS)
    assert not_reloaded(page)
    assert finished(record)["status"] == "killed"
    assert wait_gone([int(record["pid"])], timeout=10)
    assert session_members(sid) == {}  # the whole process group went with the runner


def test_declining_the_confirmation_kills_nothing(
    dashboard: Server, page: Any, home: StateRoot
) -> None:
    record = spawn("-t", "sleep 300")
    open_live(page, dashboard.url)
    page.wait_for_selector(row(record["run"]), timeout=WAIT_MS)
    page.click(f'{row(record["run"])} button[data-action="kill"]')
    page.click("#confirm-no")
    assert json.loads(cli("status", "--json", record["run"]).stdout)["status"] == "running"


def test_another_sessions_run_needs_a_second_confirmation(
    dashboard: Server, page: Any, home: StateRoot
) -> None:
    record = spawn("--session", "other", "-t", "sleep 300")
    open_live(page, dashboard.url)
    page.click(f'{row(record["run"])} button[data-action="kill"]')
    page.click("#confirm-yes")
    page.wait_for_selector("#confirm-text:has-text('anyway (force)')", timeout=WAIT_MS)
    assert "belongs to other" in (page.text_content("#confirm-text") or "")
    page.click("#confirm-no")  # declined: the run lives
    assert json.loads(cli("status", "--json", record["run"]).stdout)["status"] == "running"
    page.click(f'{row(record["run"])} button[data-action="kill"]')
    page.click("#confirm-yes")
    page.wait_for_selector("#confirm-text:has-text('anyway (force)')", timeout=WAIT_MS)
    page.click("#confirm-yes")
    page.wait_for_selector(f'{row(record["run"])}[data-status="killed"]', timeout=WAIT_MS)
    assert finished(record)["status"] == "killed"


XSS = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"


def test_run_written_text_is_shown_as_text(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    """Output, stderr, a recipe path and a message summary full of markup and control
    characters reach the page as text: nothing runs, nothing is parsed as HTML."""
    name = "<img src=x onerror=window.__pwned=3>"
    recipe = write_recipe(
        tmp_path,
        name,
        {
            "template": f'sh -c \'printf "%s\\\\033[31m\\\\007\\\\n" "{XSS}"; printf "{XSS}" >&2; exit 4\''
        },
    )
    record = spawn(str(recipe))
    assert finished(record)["status"] == "failed"
    open_live(page, dashboard.url)
    page.wait_for_selector(row(record["run"]), timeout=WAIT_MS)
    assert name in (page.text_content(f"{row(record['run'])} td.what") or "")
    page.goto(f"{dashboard.base}/#/run/{record['run']}")
    page.wait_for_selector("#tail .line", timeout=WAIT_MS)
    assert XSS in (page.text_content("#tail .line .text") or "")
    assert XSS in (page.text_content(".failure pre.stderr") or "")
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('#view script, #view img').length") == 0


def test_a_swarms_room_page_shows_its_claims(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path, repo: Path
) -> None:
    from tests.integration.test_backlog_swarm import (
        BACKLOG,
        ITEMS,
        idle,
        kill_and_reap,
        results,
        spawn_swarm,
        wait_room,
    )

    record = spawn_swarm(tmp_path, repo, BACKLOG, keep_alive="true")
    run = record["run"]
    open_live(page, f"{dashboard.url}")
    page.goto(f"{dashboard.base}/#/room/{run}")
    mark(page)
    messages = wait_room(
        home,
        run,
        lambda ms: len(results(ms)) == 6 and idle(ms, run, "front") and idle(ms, run, "back"),
    )
    for item in ITEMS:  # every task, live, with its result (the `actors result` table)
        page.wait_for_selector(f'tr[data-claim="{item}"][data-state="done"]', timeout=WAIT_MS)
    assert not_reloaded(page)
    claimed = {m["body"]["item"]: m["from"] for m in messages if m["type"] == "task.claim"}
    for item, worker in claimed.items():
        cells = page.locator(f'tr[data-claim="{item}"] td')
        assert cells.nth(1).text_content() == worker.rsplit("/", 1)[-1]
    page.wait_for_selector("p.drained", timeout=WAIT_MS)  # kept alive, drained once
    assert f"Run {run} drained: 6 done, 0 failed" in (page.text_content("p.drained") or "")
    from playwright.sync_api import expect

    for worker in ("front", "back"):
        cells = page.locator(f'tr[data-worker="branch:{run}/{worker}"] td')
        mine = sum(1 for w in claimed.values() if w.endswith(f"/{worker}"))
        # the claim rows can all be done in a render from before the worker's last idle
        # message: expect() re-reads each cell until the live update lands
        for index, text in enumerate([str(mine), str(mine), "0", "0", "idle"], start=1):
            expect(cells.nth(index)).to_have_text(text, timeout=WAIT_MS)
    screenshot(page, "room")
    pids = [
        m["body"]["pid"] for m in messages if m["type"] == "task.awaiting" and m["body"]["idle"]
    ]
    kill_and_reap(record, pids)


def test_the_sessions_page_shows_receipts_and_levels(
    dashboard: Server, page: Any, home: StateRoot
) -> None:
    record = spawn("-t", "sh -c 'exit 5'")
    assert finished(record)["status"] == "failed"  # a follow-up is owed, and delivered
    open_live(page, dashboard.url)
    page.goto(f"{dashboard.base}/#/sessions")
    page.wait_for_selector("table.deliveries tr[data-delivery]", timeout=WAIT_MS)
    box = page.locator("section[data-session]").first
    assert box.locator(".declared").text_content() == "D3"  # the file adapter declares D3
    assert box.locator(".observed").text_content() == "D3"
    delivery = box.locator("tr[data-delivery]").first
    cells = delivery.locator("td").all_text_contents()
    assert cells[0] == record["run"]
    assert cells[1].startswith("run.failed") and cells[2] == "delivered"
    assert delivery.locator(".chip.on").all_text_contents() == ["queued", "triggered"]
    screenshot(page, "sessions")


def test_pages_of_runs_paginate(dashboard: Server, page: Any, home: StateRoot) -> None:
    ids = [spawn("-t", "true")["run"] for _ in range(3)]
    for run in ids:
        finished({"run": run, "pid": load_run(home.run(run))["pid"]})
    open_live(page, dashboard.url)
    page.goto(f"{dashboard.base}/#/?status=done&per=2")
    page.wait_for_selector("#page >> text=page 1 of 2", timeout=WAIT_MS)
    first = page.locator("tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)")
    page.click("#next")
    page.wait_for_selector("#page >> text=page 2 of 2", timeout=WAIT_MS)
    second = page.locator("tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)")
    assert len(first) == 2 and len(second) == 1
    assert first + second == list(reversed(ids))  # newest first, each once


def test_a_runner_killed_outright_shows_its_run_ended(
    dashboard: Server, page: Any, home: StateRoot, tmp_path: Path
) -> None:
    """SIGKILL to the runner writes no file at all: the page still learns it from the
    runner's pidfd (as the guardians do), without a reload."""
    import os
    import signal

    ready = make_fifo(tmp_path / "ready.fifo")
    record = spawn("-t", f"sh -c 'echo up > {ready}; exec sleep 300'")
    assert read_fifo_line(ready) == "up"
    open_live(page, dashboard.url)
    page.wait_for_selector(f'{row(record["run"])}[data-status="running"]', timeout=WAIT_MS)
    mark(page)
    os.kill(int(record["pid"]), signal.SIGKILL)
    page.wait_for_selector(f'{row(record["run"])}[data-status="exited"]', timeout=WAIT_MS)
    assert not_reloaded(page)

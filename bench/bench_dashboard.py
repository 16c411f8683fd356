"""`actors dashboard` with 10,000 runs: first paint, and event-to-screen for a new run.

The state root is built fast and real: a few runs are spawned and finished for real, then
their state files are cloned under new ids (run.json and result.json rewritten with the
new id and a distinct creation time) and registered in index.json the way the runtime
does, by a listing (`list_runs`). The dashboard runs as users run it (a subprocess,
`--port 0`), the page in Debian's headless Chromium (playwright).

Rows:
- first paint: navigation to the runs table on screen, measured from the test's side
  (goto -> the first row in the DOM); baseline in the same run: the same page, already
  rendered, saved as static HTML of the same size and served by `python -m http.server`.
  The page's own mark (a requestAnimationFrame after the table is inserted, relative to
  the navigation's start) is printed beside it.
- event to screen: `actors.spawn` called -> its row visible, the page never reloaded;
  baseline: the spawn call alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench._stats import emit, row
from tests.dashboard.conftest import CHROMIUM, CHROMIUM_ARGS

CLONED = ("run.json", "result.json", "progress.json", "events.jsonl", "stdout.log", "stderr.log")


def _seed(root: Path) -> list[Path]:
    """A few real, finished runs to clone."""
    import actors

    records = [
        actors.spawn(template="echo seeded"),
        actors.spawn(template="sh -c 'echo failing >&2; exit 3'"),
        actors.spawn(template="true"),
    ]
    for record in records:
        actors.wait(record["run"], timeout=60)
    return [root / "runs" / r["run"] for r in records]


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def build_root(root: Path, count: int) -> float:
    """`count` runs in `root`; returns the seconds the registering listing took."""
    from runtime.store.layout import StateRoot
    from runtime.views.index import list_runs

    seeds = _seed(root)
    files = [
        {name: (s / name).read_bytes() for name in CLONED if (s / name).exists()} for s in seeds
    ]
    start = time.time() - count  # one second apart, oldest first
    for i in range(count - len(seeds)):
        run_id = f"bench-{i:06d}"
        target = root / "runs" / run_id
        os.mkdir(target, 0o700)
        for name, data in files[i % len(files)].items():
            if name in ("run.json", "result.json"):
                record = json.loads(data)
                record["run"] = run_id
                record["created_at"] = _iso(start + i)
                data = json.dumps(record).encode()
            _write(target / name, data)
    began = time.perf_counter()
    listed = list_runs(StateRoot(root))
    assert len(listed) == count, len(listed)
    return time.perf_counter() - began


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


@contextlib.contextmanager
def dashboard() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", "dashboard", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    url = proc.stdout.readline().strip() if ready else ""
    try:
        assert url.startswith("http://"), "the dashboard did not start"
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


@contextlib.contextmanager
def static_server(directory: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else ""  # "Serving HTTP on 127.0.0.1 port N ..."
    try:
        yield f"http://127.0.0.1:{line.split(' port ')[1].split()[0]}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _first_paint(page: Any, url: str) -> tuple[float, float | None]:
    began = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("tr[data-run]", timeout=30_000)
    outside = (time.perf_counter() - began) * 1000
    # two frames on: the page's own requestAnimationFrame mark has landed
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    mark = page.evaluate(
        "(performance.getEntriesByName('runs-painted')[0] || {}).startTime ?? null"
    )
    return outside, mark


def measure(root: Path, count: int, samples: int) -> None:
    from playwright.sync_api import sync_playwright

    import actors

    with dashboard() as url, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1100, "height": 700})
        page = context.new_page()
        page.goto(url)  # the token becomes a cookie
        page.wait_for_selector("tr[data-run]", timeout=60_000)
        base = url.split("/?", 1)[0] + "/"
        paints, marks = [], []
        for _ in range(samples):
            outside, mark = _first_paint(page, base)
            paints.append(outside)
            if isinstance(mark, int | float):
                marks.append(float(mark))
        snapshot = Path(tempfile.mkdtemp(prefix="dash-static-"))
        html = page.evaluate("document.documentElement.outerHTML")
        html = html.replace('<script src="/static/app.js" defer=""></script>', "")
        (snapshot / "index.html").write_text("<!doctype html>" + html)
        (snapshot / "static").mkdir()
        shutil.copy(
            Path(actors.__file__).parent / "dashboard/static/style.css", snapshot / "static"
        )
        with static_server(snapshot) as static:
            baseline = [_first_paint(page, static + "/")[0] for _ in range(samples)]
        shutil.rmtree(snapshot, ignore_errors=True)
        emit(row(f"dashboard first paint, {count} runs", paints, baseline))
        if marks:
            emit(row("  page's own mark (navigation -> rAF)", marks))

        page.goto(base)
        page.wait_for_selector("#live.on", timeout=30_000)
        page.evaluate("window.__not_reloaded = true")
        spawned, visible = [], []
        for _ in range(samples):
            began = time.perf_counter()
            record = actors.spawn(template="sleep 0.1")
            spawned.append((time.perf_counter() - began) * 1000)
            page.wait_for_selector(f'tr[data-run="{record["run"]}"]', timeout=30_000)
            visible.append((time.perf_counter() - began) * 1000)
            actors.wait(record["run"], timeout=60)
        assert page.evaluate("window.__not_reloaded === true")
        emit(row(f"dashboard spawn -> row on screen, {count} runs", visible, spawned))
        browser.close()


def main(quick: bool = False) -> None:
    if not os.access(CHROMIUM, os.X_OK):
        emit(f"dashboard: skipped ({CHROMIUM} missing; make system-deps installs it)")
        return
    count = 1_000 if quick else 10_000
    samples = 5 if quick else 15
    work = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    old = {k: os.environ.get(k) for k in ("ACTORS_HOME", "ACTORS_SESSION")}
    os.environ["ACTORS_HOME"] = str(work / "state")
    os.environ.pop("ACTORS_SESSION", None)
    try:
        listing = build_root(work / "state", count)
        emit(f"{f'registering {count} cloned runs (list_runs)':<44} {listing * 1000:8.0f} ms")
        measure(work / "state", count, samples)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main("--quick" in sys.argv)

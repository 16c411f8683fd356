"""The dashboard as users run it: `actors dashboard --port 0` in a subprocess (the URL
read from its stdout), and a real headless Chromium (Debian's, installed by `make
system-deps`) driven by playwright.

Without /usr/bin/chromium the browser tests skip with the reason, unless
ACTORS_REQUIRE_BROWSER=1 or ACTORS_REQUIRE_PEERS=1 (CI) is set: then they fail.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.integration.test_backlog_swarm import repo  # noqa: F401  (the swarm's git repository)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = REPO / "docs" / "images"


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    """As printed: http://127.0.0.1:PORT/?token=..."""

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]


def start_dashboard(*args: str, timeout: float = 30) -> Server:
    """`actors dashboard --port 0 ARGS`, returned once it printed its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", "dashboard", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().strip() if ready else ""
    if not line.startswith("http://"):
        proc.kill()
        _out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        raise AssertionError(f"dashboard did not start: {line!r} {err}")
    return Server(proc, line)


def stop_dashboard(server: Server) -> subprocess.CompletedProcess[str]:
    """Ctrl-C, as a user stops it; it must exit 0 promptly, open pages or not."""
    server.proc.send_signal(signal.SIGINT)
    out, err = server.proc.communicate(timeout=15)
    return subprocess.CompletedProcess(server.proc.args, server.proc.returncode, out, err)


@pytest.fixture
def dashboard(home: Any) -> Iterator[Server]:
    server = start_dashboard()
    try:
        yield server
    finally:
        done = stop_dashboard(server)
        assert done.returncode == 0, done.stderr
        assert "stopped" in done.stderr


def _required() -> bool:
    return "1" in (os.environ.get("ACTORS_REQUIRE_BROWSER"), os.environ.get("ACTORS_REQUIRE_PEERS"))


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the session's tests (a fresh context per test)."""
    why = None
    if not os.access(CHROMIUM, os.X_OK):
        why = f"{CHROMIUM} is not installed (make system-deps installs it)"
    else:
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            why = "the playwright package is not installed (pip install -e '.[test]')"
    if why:
        if _required():
            pytest.fail(why + " (ACTORS_REQUIRE_BROWSER/PEERS=1: a skipped browser test fails)")
        pytest.skip(why)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1100, "height": 640})
    tab = context.new_page()
    alerts: list[str] = []
    tab.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    tab.alerts = alerts  # a native dialog would be a script the page did not write
    yield tab
    context.close()
    assert not alerts, f"a native dialog opened: {alerts}"


def screenshot(tab: Any, name: str, *, full_page: bool = False) -> None:
    """With ACTORS_WRITE_SCREENSHOTS=1, the picture docs/dashboard.md shows (the whole
    page with `full_page`, else what the window shows)."""
    if os.environ.get("ACTORS_WRITE_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SHOTS / f"dashboard-{name}.png"), full_page=full_page)


def pngs() -> list[Path]:
    return sorted(SHOTS.glob("dashboard-*.png"))

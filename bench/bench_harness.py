"""Durable follow-up -> confirmed in each real harness's conversation (the peers).

Each sample is one `DeliveryRunner.submit` of a follow-up, timed from the call (before
the inbox append) to its return with the receipt; with `processed_timeout=0` the adapter
returns as soon as it has confirmed `injected` (OpenCode: the message readable from the
server; Codex: the userMessage `item/completed`; pi: the user `message_end`). The
baseline is the same submit to a `file` session (durable append + wake file only), in the
same process. The harness is warmed by one delivery first (a fresh OpenCode instance
spends seconds bootstrapping its first turn). Needs `make peers`; skipped otherwise.
Claude Code is measured by tests/peers/test_claude_code.py (its wake goes through the
model's own file watcher, not a call we can time from here).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench._stats import emit, register_session, row


def _samples(session: str, count: int) -> list[float]:
    from runtime.delivery.engine import DeliveryRunner
    from runtime.store.layout import StateRoot

    runner = DeliveryRunner(StateRoot.from_env())
    out = []
    for i in range(count + 1):
        envelope = {"type": "run.done", "from": "run:bench", "summary": f"bench TOKEN-{i}"}
        started = time.perf_counter()
        state = runner.submit(session, envelope, delivery_id=f"{session}-{i}-{time.time_ns()}")
        elapsed = (time.perf_counter() - started) * 1000
        if state.get("state") != "delivered":
            raise RuntimeError(f"{session}: {state.get('reason')}")
        if i:  # the first one warms the harness
            out.append(elapsed)
    return out


@contextlib.contextmanager
def _opencode(base: Path, port: int) -> Iterator[dict[str, str]]:
    from tests.peers.run_opencode import opencode_server

    with opencode_server(base, port) as oc:
        yield {
            "url": oc.url,
            "session": oc.new_session(),
            "password": oc.password,
            "confirm_timeout": "15",
        }


@contextlib.contextmanager
def _kilo(base: Path, port: int) -> Iterator[dict[str, str]]:
    """Kilo Code's `kilo serve` (an OpenCode fork, peers/more/), an `opencode` session
    whose server user is `kilo`."""
    from tests.peers.run_opencode import KILO, opencode_server

    with opencode_server(base, port, flavour=KILO) as oc:
        yield {
            "url": oc.url,
            "session": oc.new_session(),
            "username": oc.username,
            "password": oc.password,
            "confirm_timeout": "15",
        }


@contextlib.contextmanager
def _qwen(base: Path, port: int) -> Iterator[dict[str, str]]:
    """The interactive Qwen Code (peers/more/) in tmux, with `--input-file` and
    `--json-file`: a `qwen_code` session."""
    from runtime.store.layout import StateRoot
    from tests.peers.run_qwen import Qwen, qwen_tui

    qwen = Qwen(base, port, StateRoot.from_env().path, "wake-qwen").setup()
    with qwen_tui(qwen) as tui:
        yield tui.options()


@contextlib.contextmanager
def _codex(base: Path, port: int) -> Iterator[dict[str, str]]:
    import trio

    from adapters.codex.rpc import connect
    from tests.peers.run_codex import codex_server

    with codex_server(base, port) as codex:

        async def thread() -> str:
            async with connect(socket=str(codex.socket)) as conn:
                await conn.initialize("bench")
                started = await conn.request("thread/start", {"cwd": str(codex.project)})
                return str(started["thread"]["id"])

        yield {"socket": str(codex.socket), "thread": trio.run(thread)}


@contextlib.contextmanager
def _pi(base: Path, port: int) -> Iterator[dict[str, str]]:
    from tests.peers.run_pi import run_pi

    with run_pi(base, port) as socket:
        yield {"socket": str(socket)}


HARNESSES: dict[str, Callable[[Path, int], Any]] = {
    "opencode": _opencode,
    "codex": _codex,
    "pi": _pi,
    "kilo": _kilo,
    "qwen": _qwen,
}
ADAPTER = {"kilo": "opencode", "qwen": "qwen_code"}
"""The adapter of a row whose name is not its adapter's (Kilo goes through opencode's)."""
_MORE_ROWS = ("kilo", "qwen")
"""The rows whose harness is pinned in peers/more/ (installed into .peers/more/)."""


def installed(name: str) -> bool:
    """Whether the harness of row `name` is installed (`make peers`: .peers/, and
    .peers/more/ for the harnesses pinned in peers/more/)."""
    from tests.peers.conftest import MORE, PEERS, PEERS_BIN

    return PEERS_BIN.exists() and (
        name != "kilo" or (PEERS / MORE / "node_modules" / ".bin" / "kilo").exists()
    )


def main(quick: bool) -> None:
    from tests.peers.conftest import PEERS_BIN
    from tests.peers.fake_llm import FakeLLM

    if not PEERS_BIN.exists():
        emit("harness delivery: skipped (run `make peers` to install the harnesses)")
        return
    count = 5 if quick else 20
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        os.environ["ACTORS_PROCESSED_TIMEOUT"] = "0"
        llm = FakeLLM()
        llm.start()
        try:
            register_session("file", "bench-file")
            baseline = _samples("bench-file", count)
            emit(row("follow-up submit -> durable (file baseline)", baseline))
            for name, launch in HARNESSES.items():
                if not installed(name):
                    emit(f"follow-up submit -> injected ({name}): skipped (run `make peers`)")
                    continue
                with launch(Path(tmp) / name, llm.port) as options:
                    register_session(ADAPTER.get(name, name), f"bench-{name}", **options)
                    samples = _samples(f"bench-{name}", count)
                emit(row(f"follow-up submit -> injected ({name})", samples, baseline))
        finally:
            llm.stop()


if __name__ == "__main__":
    main("--quick" in sys.argv)

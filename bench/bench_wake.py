"""Wake latency: a run ends -> the idle harness's model gets its next request.

Each sample spawns a `true` run owned by a session of a real harness (started by the
peers tier's helpers against the fake model on 127.0.0.1) and times from the run's
`ended_at` to the fake model's receipt of the request that carries the run's follow-up:
the whole path a user waits on (runner exit, follow-up, delivery, the harness turning it
into a model turn). The baseline, from the same process, is the same run-end -> the
`delivered` record of a `file` session (actors' own part only). After each sample the
next waits until the delivery is journaled done, so every wake finds the harness idle;
the first sample of each harness warms it and is dropped. Gemini CLI and Cursor have no
idle wake (follow-ups ride on the next turn's end), so they have no row; nor has Copilot
CLI (its agentStop hook, the same). Kilo Code is woken through the opencode adapter (its
`kilo serve` is OpenCode's server), the interactive Qwen Code through its input file
(`qwen_code`). Needs `make peers`; skipped
otherwise.

A user's own interactive pi (1.x, in tmux, with the actors pi extension `actors install
pi` writes) has the row `pi_tui`: no host process of ours, woken by the extension's
fs.watch on the session's wake file.

Claude Code has three rows: its default (the messaging socket, where the session has one
and Claude's inbound gate lets it through), `-o messaging=socket` set explicitly (the
same path), and `-o messaging=doorbell` (the FileChanged doorbell, the fallback), plus a
headless `claude -p` coordinator held open by its Stop hook (adapters/claude_code/stop.py),
one `claude -p` per sample, timed from the end of the run it spawned. Beside
them, in the same run, hcom (PyPI, the `bench` extra: `pip install -e '.[bench]'`) waking
the same pinned Claude Code against the same fake model (HCOM_ROWS), timed from just
before `hcom send` starts to the model's request carrying the message; skipped when hcom
is not installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._stats import emit, percentile, register_session, row

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.peers.fake_llm import FakeLLM

DEADLINE_S = 60.0
CLAUDE_ROWS = (
    ("default", None),
    ("-o messaging=socket", "socket"),
    ("-o messaging=doorbell", "doorbell"),
)
"""Claude Code's rows: the label, and the `messaging` option set after the first turn."""
HCOM_ROWS = (
    ("hcom claude default", ("--headless", "--hcom-prompt", "hello TOKEN-WARM")),
    ("hcom claude -p", ("-p", "hello TOKEN-WARM")),
)
"""hcom's rows: its default (an interactive Claude Code in hcom's own PTY, in the
background: hcom's plugin notices the message and injects it at UserPromptSubmit) and its
headless `claude -p` (the Stop hook held open); the label and `hcom claude` arguments."""


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _delivered_at(session: str, delivery: str, deadline: float) -> float:
    """When the session's journal says the delivery was done (polled: the journal is
    written by the run's runner, a process we share nothing with but the file)."""
    from runtime.store.layout import StateRoot, session_paths

    path = session_paths(StateRoot.from_env(), session).deliveries
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            record = json.loads(line)
            if record["id"] == delivery and record["event"] == "delivered":
                return _epoch(record["ts"])
        time.sleep(0.005)
    raise TimeoutError(f"{session}: {delivery} was not delivered in {DEADLINE_S:.0f}s")


def _sample(session: str, llm: FakeLLM | None) -> float:
    """ms from one run's end to the model request carrying its follow-up (no model: to
    the delivery record); returns once the delivery is journaled, the harness idle."""
    import actors

    record = actors.spawn(template="true", session=session)
    start = len(llm.requests) if llm else 0
    ended = _epoch(str(actors.wait(record["run"], timeout=DEADLINE_S)["ended_at"]))
    deadline = time.monotonic() + DEADLINE_S
    delivered = _delivered_at(session, f"{record['run_instance_id']}:terminal", deadline)
    if llm is None:
        return (delivered - ended) * 1000
    run = str(record["run"])
    request = llm.wait_request(lambda r: run in json.dumps(r["body"]), start, timeout=DEADLINE_S)
    return (float(request["ts"]) - ended) * 1000


def _samples(session: str, count: int, llm: FakeLLM | None) -> list[float]:
    return [_sample(session, llm) for _ in range(count + 1)][1:]  # the first warms


def _claude_samples(base: Path, llm: FakeLLM, count: int, messaging: str | None) -> list[float]:
    """Claude Code registers its own session (SessionStart hook of `actors install`; the
    first prompt records its permission mode) and is woken by the messaging socket, or
    with `messaging` set to doorbell by its file watcher; after each wake its turn ends
    and the inbox is read, so the next run's follow-up finds it idle again."""
    from runtime.delivery.sessions import SessionInbox, update_session
    from runtime.store.layout import StateRoot, session_paths
    from tests.peers.conftest import peer_bin
    from tests.peers.run_claude import claude_session

    root = StateRoot.from_env()
    with claude_session(peer_bin("claude"), llm.port, root.path, base) as claude:
        claude.send_user("hello TOKEN-WARM")
        session = str(claude.next_result(timeout=90)["session_id"])
        if messaging:  # what `-o messaging=...` sets, keeping what the hooks recorded

            def keep_hooks(record: dict[str, Any]) -> dict[str, Any]:
                record["options"]["messaging"] = messaging
                return record

            update_session(root, session, keep_hooks)
        out = []
        for _ in range(count + 1):
            mark = claude.mark()
            out.append(_sample(session, llm))
            claude.next_result(timeout=DEADLINE_S, after=mark)
            SessionInbox(session_paths(root, session)).drain()
    return out[1:]


def _descends(pid: int, ancestor: int, depth: int = 4) -> bool:
    """Is `ancestor` among the first `depth` ancestors of `pid`?"""
    for _ in range(depth):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def _hook_waiting(claude_pid: int, deadline: float) -> None:
    """Until Claude's Stop hook (`actors hook stop`, a descendant of `claude_pid`) sleeps
    in its poll: the coordinator is idle, as hcom's agent is once it lists `listening`."""
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if b"hook" not in argv or b"stop" not in argv:
                    continue
                if "poll" in (entry / "wchan").read_text() and _descends(
                    int(entry.name), claude_pid
                ):
                    return
        time.sleep(0.01)
    raise TimeoutError(f"claude {claude_pid}: its Stop hook never waited")


def _created_at(session: str, run: str) -> float:
    """When the run's terminal follow-up was appended to the session's inbox (its
    `created` record in the session's delivery journal)."""
    from runtime.store.layout import StateRoot, session_paths

    root = StateRoot.from_env()
    delivery = json.loads(root.run(run).run_json.read_text())["run_instance_id"] + ":terminal"
    for line in session_paths(root, session).deliveries.read_text().splitlines():
        record = json.loads(line)
        if record["id"] == delivery and record["event"] == "created":
            return _epoch(record["ts"])
    raise LookupError(f"{session}: {delivery} was not created")


def _headless_samples(base: Path, llm: FakeLLM, count: int) -> tuple[list[float], list[float]]:
    """A headless coordinator: per sample one `claude -p` whose model spawns a run gated
    on a FIFO (through the Bash tool), then ends its turn; once its Stop hook waits, the
    gate opens. Two figures per sample: the run's end -> the model request carrying its
    follow-up (the Stop hook's answer), and the follow-up's `created` (in the session's
    inbox, durable: what `hcom send` is to hcom's row) -> that request. The process then
    ends by itself."""
    import subprocess

    import actors
    from runtime.store.layout import StateRoot
    from runtime.views.index import list_runs
    from tests.peers.conftest import peer_bin
    from tests.peers.run_claude import MODEL, claude_env, install_actors

    root = StateRoot.from_env()
    config_dir, home_dir, cwd = base / "config", base / "home", base / "project"
    for directory in (config_dir, home_dir, cwd):
        directory.mkdir(parents=True, exist_ok=True)
    env = claude_env(config_dir, home_dir, llm.port, root.path)
    install_actors(env, cwd)
    from_end, from_created = [], []
    for index in range(count + 1):
        gate = base / f"gate-{index}"
        os.mkfifo(gate)
        known = {r["run"] for r in list_runs(root)}
        prompt = f"coordinate [tool:Bash:actors spawn -t 'cat {gate}'] TOKEN-HEADLESS"
        command = [
            str(peer_bin("claude")),
            "-p",
            prompt,
            "--allowedTools",
            "Bash",
            "--model",
            MODEL,
        ]
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            _hook_waiting(proc.pid, time.monotonic() + DEADLINE_S)
            (run,) = [r["run"] for r in list_runs(root) if r["run"] not in known]
            start = len(llm.requests)
            with open(gate, "w") as writer:
                writer.write("done\n")
            status = actors.wait(run, timeout=DEADLINE_S)
            request = llm.wait_request(_carrying(str(run)), start, DEADLINE_S)
            at = float(request["ts"])
            from_end.append((at - _epoch(str(status["ended_at"]))) * 1000)
            from_created.append((at - _created_at(str(status["owner_id"]), str(run))) * 1000)
            proc.wait(timeout=DEADLINE_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=DEADLINE_S)
    return from_end[1:], from_created[1:]


def hcom_binary() -> str | None:
    """hcom from the `bench` extra (next to this interpreter), else on PATH."""
    import shutil

    beside = Path(sys.executable).parent / "hcom"
    return str(beside) if beside.exists() else shutil.which("hcom")


def _carrying(token: str) -> Callable[[dict[str, Any]], bool]:
    return lambda request: token in json.dumps(request["body"])


def _hcom_samples(
    hcom: str, base: Path, llm: FakeLLM, count: int, launch: tuple[str, ...]
) -> list[float]:
    """hcom's headless Claude: `hcom claude -p` runs the pinned Claude Code with hcom's
    hooks (its Stop hook holds the finished turn open, listening); each sample times
    `hcom send @agent -- TOKEN` from just before it starts to the model's request that
    carries the token, then waits until the agent listens again."""
    import subprocess

    from tests.peers.conftest import peer_bin, peer_version
    from tests.peers.run_claude import MODEL, claude_env

    for name in ("config", "home", "project", "bin", "hcom"):
        (base / name).mkdir(parents=True, exist_ok=True)
    (base / "bin" / "claude").symlink_to(peer_bin("claude"))
    env = claude_env(base / "config", base / "home", llm.port, base / "state")
    env.update(PATH=f"{base / 'bin'}{os.pathsep}{env['PATH']}", HCOM_DIR=str(base / "hcom"))
    # an interactive Claude's first start checks api.anthropic.com (and exits offline),
    # then asks whether to trust the folder and to use the API key: a config past all three
    seen = {
        "customApiKeyResponses": {"approved": [env["ANTHROPIC_API_KEY"][-20:]]},
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": peer_version("claude"),
        "projects": {str(base / "project"): {"hasTrustDialogAccepted": True}},
    }
    (base / "config" / ".claude.json").write_text(json.dumps(seen))

    def hcom_cmd(*args: str) -> str:
        done = subprocess.run(
            [hcom, *args], env=env, cwd=base / "project", capture_output=True, text=True,
            timeout=DEADLINE_S, check=True,
        )  # fmt: skip
        return done.stdout

    def agent(status: str) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            listed = json.loads(hcom_cmd("list", "--json") or "[]")
            ready = [a for a in listed if a.get("status") == status]
            if ready:
                return str(ready[0]["name"])
            time.sleep(0.05)
        raise TimeoutError(f"no hcom agent {status} within {DEADLINE_S:.0f}s")

    start = len(llm.requests)
    with open(base / "hcom.log", "wb") as log:
        proc = subprocess.Popen(
            [hcom, "claude", *launch, "--model", MODEL],
            env=env,
            cwd=base / "project",
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        llm.wait_request(lambda r: "TOKEN-WARM" in json.dumps(r["body"]), start, DEADLINE_S)
        out = []
        for index in range(count + 1):
            name = agent("listening")
            token = f"TOKEN-HCOM-{index}"
            start = len(llm.requests)
            sent = time.time()
            hcom_cmd("send", "--from", "bench", f"@{name}", "--", f"wake {token}")
            request = llm.wait_request(_carrying(token), start, DEADLINE_S)
            out.append((float(request["ts"]) - sent) * 1000)
        return out[1:]
    finally:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            hcom_cmd("kill", "all")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=DEADLINE_S)


def _pi_tui_samples(base: Path, llm: FakeLLM, count: int) -> list[float] | None:
    """A user's interactive pi 1.x in tmux with the actors pi extension (`actors install
    pi`), which registers its session and is woken idle through its fs.watch on the wake
    file; after each wake the next sample waits for the woken turn's answer in pi's own
    session file, so every wake finds pi idle. None when pi 1.x is not installed."""
    import pytest

    from runtime.delivery.sessions import load_session
    from runtime.store.layout import StateRoot
    from tests.peers.run_pi import pi_tui

    root = StateRoot.from_env()
    try:
        context = pi_tui(base, llm.port)
        pi = context.__enter__()
    except pytest.skip.Exception:
        return None
    try:
        transcript = Path(load_session(root, pi.session)["session_file"])

        def answers() -> int:
            text = transcript.read_text() if transcript.exists() else ""
            return text.count('"role":"assistant"')

        out = []
        for turn in range(1, count + 2):
            out.append(_sample(pi.session, llm))
            deadline = time.monotonic() + DEADLINE_S
            while answers() < turn and time.monotonic() < deadline:
                time.sleep(0.005)  # pi writes its transcript: nothing to wait on but the file
    finally:
        context.__exit__(None, None, None)
    return out[1:]


def _report(harness: str, samples: list[float], baseline: list[float] | None) -> None:
    """One JSON line per harness for docs/adapters.md's level table, when
    ACTORS_WAKE_REPORT names a file (scripts/adapters_report.py sets it)."""
    target = os.environ.get("ACTORS_WAKE_REPORT")
    if not target:
        return
    line = {
        "harness": harness,
        "n": len(samples),
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 99),
        "baseline_median_ms": statistics.median(baseline) if baseline else None,
    }
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def main(quick: bool) -> None:
    from bench.bench_harness import ADAPTER, HARNESSES, installed
    from tests.peers.conftest import PEERS_BIN
    from tests.peers.fake_llm import FakeLLM

    if not PEERS_BIN.exists():
        emit("wake latency: skipped (run `make peers` to install the harnesses)")
        return
    count = 5 if quick else 20
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        llm = FakeLLM()
        llm.start()
        try:
            register_session("file", "wake-file")
            baseline = _samples("wake-file", count, None)
            emit(row("run end -> follow-up delivered (file baseline)", baseline))
            _report("file", baseline, None)
            for name, launch in HARNESSES.items():
                if not installed(name):
                    emit(f"run end -> model request ({name}): skipped (run `make peers`)")
                    continue
                with launch(Path(tmp) / name, llm.port) as options:
                    register_session(ADAPTER.get(name, name), f"wake-{name}", **options)
                    samples = _samples(f"wake-{name}", count, llm)
                emit(row(f"run end -> model request ({name})", samples, baseline))
                _report(name, samples, baseline)
            for label, messaging in CLAUDE_ROWS:
                samples = _claude_samples(Path(tmp) / f"claude-{label}", llm, count, messaging)
                emit(row(f"run end -> model request (claude_code {label})", samples, baseline))
                _report(
                    "claude_code" if messaging is None else f"claude_code {label}",
                    samples,
                    baseline,
                )
            samples, submitted = _headless_samples(Path(tmp) / "claude-headless", llm, count)
            label = "claude_code claude -p, Stop hook"
            emit(row(f"run end -> model request ({label})", samples, baseline))
            emit(row(f"follow-up created -> model request ({label})", submitted, baseline))
            _report("claude_code claude -p", samples, baseline)
            pi_samples = _pi_tui_samples(Path(tmp) / "pi-tui", llm, count)
            if pi_samples is None:
                emit("pi_tui: skipped (pi >= 1 not installed: make peers)")
            else:
                emit(row("run end -> model request (pi_tui, the actors pi extension)",
                         pi_samples, baseline))  # fmt: skip
                _report("pi_tui", pi_samples, baseline)
            hcom = hcom_binary()
            if hcom is None:
                emit("hcom: skipped (not installed: pip install -e '.[bench]')")
            else:
                for label, hcom_args in HCOM_ROWS:
                    where = Path(tmp) / f"hcom-{len(label)}"
                    samples = _hcom_samples(hcom, where, llm, count, hcom_args)
                    emit(row(f"hcom send -> model request ({label})", samples, baseline))
                    _report(label, samples, baseline)
        finally:
            llm.stop()


if __name__ == "__main__":
    main("--quick" in sys.argv)

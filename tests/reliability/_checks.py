"""Shared assertions of the corrupt-file, hostile-input and ownership suites.

What every command must do with bad state or bad input: exit 0 (it recovered) or exit 2
with exactly one `actors: ...` line on stderr (it refused, saying why) — never a Python
traceback and never the `internal error` line the CLI prints for a bug.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from tests.conftest import cli

CliResult = subprocess.CompletedProcess[str]


def journals_parse(root: Path) -> int:
    """Every JSONL journal under `root` folds: no garbage line, no torn tail. Returns how
    many there are."""
    from runtime.store.reads import read_jsonl

    count = 0
    for path in root.rglob("*.jsonl"):
        chunk = read_jsonl(path)
        assert chunk.bad_lines == 0 and not chunk.torn_tail, path
        count += 1
    return count


def describe(args: Sequence[str], proc: CliResult) -> str:
    return (
        f"actors {' '.join(args)} -> {proc.returncode}\n"
        f"stdout: {proc.stdout[-800:]!r}\nstderr: {proc.stderr[-1500:]!r}"
    )


def assert_clean(args: Sequence[str], proc: CliResult, allowed: Iterable[int] = (0, 2)) -> None:
    """No traceback, no internal error, an expected exit code, one line when refusing."""
    text = describe(args, proc)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, text
    assert "internal error" not in proc.stderr, text
    assert proc.returncode in tuple(allowed), text
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        # one `actors: ...` line, the option parser's usage errors too (docs/cli.md)
        assert len(lines) == 1 and lines[0].startswith("actors: "), text


def refused(args: Sequence[str], proc: CliResult, *needles: str) -> str:
    """Exit 2 with one clear line containing every needle; returns that line."""
    assert_clean(args, proc, allowed=(2,))
    line = proc.stderr.strip()
    for needle in needles:
        assert needle in line, describe(args, proc)
    return line


def run_cli_all(
    commands: Sequence[Sequence[str]], env: dict[str, str] | None = None, workers: int = 4
) -> list[CliResult]:
    """Run independent (read-only) CLI commands concurrently; results in input order."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda args: cli(*args, env=env), commands))


def file_bytes(root: Path) -> dict[str, bytes]:
    """The content of every regular file under `root` (symlinks and FIFOs skipped)."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def tree(root: Path) -> set[str]:
    """Every path under `root` (files, dirs, links), relative; empty if it is missing."""
    if not root.exists():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- the real CLI, forked from a warm interpreter -------------------------------------------

_ZYGOTE = r"""
import importlib, json, os, sys, traceback
import actors.cli
for target in {v.split(":")[0] for v in actors.cli.COMMANDS.values()} | {
    "runtime.compiler.model", "runtime.runs.spawn", "runtime.routing.router", "runtime.views.inspect",
    "runtime.runs.reconcile", "runtime.delivery.engine", "adapters.file",
}:
    importlib.import_module(target)  # loaded once, before any fork (pydantic included)
requests, replies = sys.stdin, sys.stdout
print("ready", file=replies, flush=True)
for line in requests:
    jobs, pids = json.loads(line), []
    for job in jobs:
        pid = os.fork()
        if pid == 0:  # a fresh process: the CLI's main() as `python -m actors` would run it
            try:
                null = os.open(os.devnull, os.O_RDONLY)
                out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(null, 0); os.dup2(out, 1); os.dup2(err, 2)
                sys.stdin = open(0, closefd=False)
                os.environ.clear(); os.environ.update(job["env"])
                os.chdir(job["cwd"])
                sys.argv = ["actors", *job["args"]]
                code = 0
                try:
                    actors.cli.main(job["args"])
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
            try:
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print(json.dumps(codes), file=replies, flush=True)
"""


CALL_TIMEOUT_S = 90.0


class _Zygote:
    """One warm interpreter that forks a fresh child per CLI call (~20 ms instead of
    ~200 ms of interpreter start and imports). The child runs `actors.cli.main` with the
    caller's argv, environment and working directory, its own stdout/stderr and no stdin:
    the real command line, minus the start-up cost."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="actors-zygote-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()
        self.count = 0
        assert self._pipe("out").readline().strip() == "ready"
        atexit.register(self.close)

    def _pipe(self, which: str) -> IO[str]:
        pipe = self.proc.stdout if which == "out" else self.proc.stdin
        assert pipe is not None
        return pipe

    def run(self, commands: Sequence[Sequence[str]], env: dict[str, str] | None) -> list[CliResult]:
        with self.lock:
            jobs: list[dict[str, Any]] = []
            for args in commands:
                self.count += 1
                jobs.append(
                    {
                        "args": list(args),
                        "env": dict(os.environ, **(env or {})),
                        "cwd": os.getcwd(),
                        "out": str(self.dir / f"{self.count}.out"),
                        "err": str(self.dir / f"{self.count}.err"),
                    }
                )
            self._pipe("in").write(json.dumps(jobs) + "\n")
            self._pipe("in").flush()
            # one reply line per request, so nothing is ever left in the reader's buffer
            ready, _, _ = select.select([self._pipe("out")], [], [], CALL_TIMEOUT_S)
            if not ready:
                self.proc.kill()
                raise TimeoutError(f"CLI calls still running after {CALL_TIMEOUT_S}s: {commands}")
            codes = json.loads(self._pipe("out").readline())
        results = []
        for job, code in zip(jobs, codes, strict=True):
            out, err = Path(job["out"]), Path(job["err"])
            results.append(
                subprocess.CompletedProcess(
                    ["actors", *job["args"]],
                    code,
                    out.read_bytes().decode(errors="replace"),
                    err.read_bytes().decode(errors="replace"),
                )
            )
            out.unlink()
            err.unlink()
        return results

    def close(self) -> None:
        if self.proc.poll() is None:
            self._pipe("in").close()
            self.proc.wait(timeout=10)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


_zygote: _Zygote | None = None


def fast_cli_all(
    commands: Sequence[Sequence[str]], env: dict[str, str] | None = None
) -> list[CliResult]:
    """Run CLI commands as concurrent forked children of a warm interpreter."""
    global _zygote
    if _zygote is None or _zygote.proc.poll() is not None:
        _zygote = _Zygote()
    return _zygote.run(commands, env)


def fast_cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """One CLI call through the warm interpreter (see `_Zygote`)."""
    return fast_cli_all([args], env)[0]

"""Issue 17 #8 (linear, bounded output) and #9 (bounded runner memory).

#8: output without newlines is quadratic in the runner's pump (it rescans the pending
buffer for a newline on every read), and every byte is stored twice (the capture and the
run log) with no cap. #9: unread data messages to a run that never calls recv grow its
runner's memory with their number.

Timings are compared with the same bytes with newlines measured in the same test, so the
bound holds on a slow or busy machine.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cpu_ticks, finished, make_fifo, read_fifo_line, write_recipe
from tests.reliability._attack import release, rss_kb

MB = 1_000_000


def _printer(tmp_path: Path, name: str, code: str) -> tuple[dict[str, object], Path]:
    """A run printing with `code` (python), then holding at a gate so the runner's peak
    RSS can be read before it exits."""
    gate = make_fifo(tmp_path / f"{name}.go")
    ready = make_fifo(tmp_path / f"{name}.ready")
    recipe = write_recipe(
        tmp_path,
        name,
        {
            "template": [
                f"{sys.executable} -c {{code}}",
                'sh -c \'echo ready > "$1"; read x < "$2"\' g {r} {g}',
            ]
        },
    )
    record = actors.spawn(
        str(recipe), as_=name, values={"code": code, "r": str(ready), "g": str(gate)}
    )
    return record, gate


def _timed(tmp_path: Path, name: str, code: str) -> tuple[float, int]:
    """(the runner's CPU seconds until the output was consumed, its peak RSS in kB).
    CPU, not wall time: a quadratic pump burns the runner's own CPU, while wall time also
    counts whatever else a busy machine is doing."""
    record, gate = _printer(tmp_path, name, code)
    assert read_fifo_line(tmp_path / f"{name}.ready", timeout=300) == "ready"
    pid = int(record["pid"])  # type: ignore[call-overload]
    elapsed = cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")
    peak = rss_kb(pid)
    release(gate)
    assert finished(record)["status"] == "done"
    return elapsed, peak


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param("b'x' * N", id="no-newline"),
        pytest.param("(b'\\r' * 100 + b'x' * 900) * (N // 1000)", id="carriage-returns-only"),
    ],
)
def test_output_without_newlines_is_linear(home: StateRoot, tmp_path: Path, shape: str) -> None:
    n = 40 * MB
    with_newlines = f"import sys; sys.stdout.buffer.write((b'x' * 99 + b'\\n') * ({n} // 100))"
    without = f"import sys; N = {n}; sys.stdout.buffer.write({shape})"
    baseline, base_peak = _timed(tmp_path, "lines", with_newlines)
    elapsed, peak = _timed(tmp_path, "flat", without)
    assert elapsed <= 3 * baseline + 0.5, (
        f"{n // MB} MB without newlines cost the runner {elapsed:.2f} s of CPU,"
        f" with newlines {baseline:.2f} s"
    )
    assert peak <= base_peak + 20_000, f"runner peak RSS {peak} kB vs {base_peak} kB with newlines"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_disk_use_of_a_run_is_capped(home: StateRoot, tmp_path: Path, stream: str) -> None:
    n = 256 * MB
    code = (
        "import sys\n"
        "block = (b'x' * 99 + b'\\n') * 10000\n"
        f"for _ in range({n} // len(block)): sys.{stream}.buffer.write(block)\n"
    )
    record = actors.spawn(
        template=f"{sys.executable} -c {{code}}", as_="big", values={"code": code}
    )
    assert finished(record, timeout=600)["status"] == "done"
    used = 0
    for dirpath, _dirs, files in os.walk(home.run("big").dir):
        for name in files:
            used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    shutil.rmtree(home.run("big").dir / "captures", ignore_errors=True)  # free the disk early
    assert used < n, f"{n // MB} MB of output left {used // MB} MB on disk"


@pytest.mark.parametrize(
    ("count", "pad"), [(40_000, 64), (2_000, 16_000)], ids=["many-small", "fewer-large"]
)
def test_unread_messages_do_not_grow_the_runner(
    home: StateRoot, tmp_path: Path, count: int, pad: int
) -> None:
    ready = make_fifo(tmp_path / "idle.ready")
    recipe = write_recipe(
        tmp_path,
        "idle",
        {
            "mailbox": {"accepts": ["job.item"]},
            "template": "sh -c 'echo ready > \"$1\"; exec sleep 600' i {r}",
        },
    )
    record = actors.spawn(str(recipe), as_="idle", values={"r": str(ready)})
    assert read_fifo_line(ready) == "ready"
    pid = int(record["pid"])
    before = rss_kb(pid, "VmRSS")
    with actors.sender("run:idle", fsync=False) as out:
        for start in range(0, count, 500):
            out.send_many(
                "job.item", [{"n": i, "pad": "p" * pad} for i in range(start, start + 500)]
            )
    # control.stop makes the runner read its inbox past every unread message; its peak
    # RSS is sampled until it exits (woken by its pidfd, not a sleep)
    actors.message("run:idle", "control.stop")
    peak = _peak_until_exit(pid)
    finished(record, timeout=300)
    assert peak - before < 30_000, (
        f"{count} unread messages took the runner from {before} kB to a peak of {peak} kB"
    )


def _peak_until_exit(pid: int) -> int:
    import select

    fd = os.pidfd_open(pid)
    peak = 0
    try:
        while True:
            try:
                peak = max(peak, rss_kb(pid))
            except (LookupError, FileNotFoundError, ProcessLookupError):
                return peak
            if select.select([fd], [], [], 0.02)[0]:
                return peak
    finally:
        os.close(fd)

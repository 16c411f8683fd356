"""Issue 17 #8, #9, #10, #5 (output): siblings of the attack tests, other shapes.

Output of any shape (one huge line, NULs, interleaved streams) costs time linear in its
size; logs rotate at ACTORS_LOG_CAP_BYTES with `tail` and `result` still working; a
capture a later step reads stays whole, one no step reads is cut to the cap; secrets are
masked in every stream even when split between two reads; a mailbox fold filtered to a
few types holds nothing of the others; records of legal but large input stay bounded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

import actors
from runtime.messaging.mailbox import Mailbox
from runtime.runner.output import CONTINUED, PARTIAL_LINE_CAP, StreamMasker
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, write_recipe

MB = 1_000_000
CAP = 100_000


def _run(name: str, code: str, timeout: float = 300) -> tuple[dict[str, object], float]:
    start = time.monotonic()
    record = actors.spawn(template=f"{sys.executable} -c {{code}}", as_=name, values={"code": code})
    summary = finished(record, timeout=timeout)
    return summary, time.monotonic() - start


SHAPES = {
    "one-huge-line": "sys.stdout.buffer.write(b'y' * N)",
    "binary-with-nuls": "sys.stdout.buffer.write(bytes(range(256)).replace(b'\\n', b'\\0') * (N // 256))",
    "interleaved-streams": (
        "[(sys.stdout.buffer.write(b'o' * 4093), sys.stderr.buffer.write(b'e' * 4093),"
        " sys.stdout.flush(), sys.stderr.flush()) for _ in range(N // 8186)]"
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_any_output_shape_is_linear_and_kept_exactly(home: StateRoot, shape: str) -> None:
    n = 24 * MB
    lines = f"import sys; sys.stdout.buffer.write((b'x' * 99 + b'\\n') * ({n} // 100))"
    flat = f"import sys; N = {n}; {SHAPES[shape]}"
    base, baseline = _run("lines", lines)
    assert base["status"] == "done"
    summary, elapsed = _run("flat", flat)
    assert summary["status"] == "done", summary
    if elapsed > 3 * baseline + 1.5:  # one slow sample on a busy machine: measure again
        baseline = min(baseline, _run("lines-again", lines)[1])
        elapsed = min(elapsed, _run("flat-again", flat)[1])
    assert elapsed <= 3 * baseline + 1.5, (
        f"{shape}: {elapsed:.1f}s vs {baseline:.1f}s with newlines"
    )
    log = home.run("flat").stdout.read_bytes()
    capture = home.run("flat").capture("command-001").stdout.read_bytes()
    expected = {
        "one-huge-line": b"y" * n,
        "binary-with-nuls": bytes(range(256)).replace(b"\n", b"\0") * (n // 256),
        "interleaved-streams": b"o" * (4093 * (n // 8186)),
    }[shape]
    assert capture == expected  # under the cap: the capture is exact
    # the log holds the same bytes, cut into bounded pieces with a continuation marker
    assert log.replace(CONTINUED, b"").replace(b"\n", b"") == expected
    longest = max(len(line) for line in log.split(b"\n"))
    assert longest <= 2 * PARTIAL_LINE_CAP + len(CONTINUED)


def test_logs_rotate_and_tail_and_result_still_work(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_LOG_CAP_BYTES", str(CAP))
    code = "import sys\nfor i in range(100000): print(f'line {i:06d}')\nprint('err end', file=sys.stderr)"
    summary, _ = _run("rot", code)
    assert summary["status"] == "done"
    paths = home.run("rot")
    log, previous = paths.stdout, paths.stdout.with_name("stdout.log.1")
    assert previous.exists() and not paths.stdout.with_name("stdout.log.2").exists()
    assert log.stat().st_size <= CAP + 2 * PARTIAL_LINE_CAP
    assert previous.stat().st_size <= CAP + 2 * PARTIAL_LINE_CAP
    # the two files together end with the last lines, in order, none lost at the seam
    joined = (previous.read_bytes() + log.read_bytes()).decode().splitlines()
    numbers = [int(line.split()[1]) for line in joined]
    assert numbers == list(range(numbers[0], 100000))
    tail = cli("tail", "rot", "-n", "5")
    assert tail.stdout.split("\n")[:5] == [f"line {i:06d}" for i in range(99995, 100000)]
    # more lines than the current file holds: continued from stdout.log.1
    count = len(log.read_text().splitlines()) + 10
    wide = cli("tail", "rot", "-n", str(count)).stdout.splitlines()
    assert wide == [f"line {i:06d}" for i in range(100000 - count, 100000)]
    result = cli("result", "rot", "--json")
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["output"].startswith("line 000000\n")
    # the final output is read by no later step: only its head is kept, marked
    capture = Path(output["output_file"]).read_bytes()
    assert len(capture) <= CAP + 300 and b"more bytes not kept" in capture
    assert cli("tail", "rot", "--stderr", "-n", "1").stdout.strip() == "err end"


def test_a_later_step_reads_its_stdin_whole_past_the_cap(
    home: StateRoot, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ACTORS_LOG_CAP_BYTES", str(CAP))
    recipe = write_recipe(tmp_path, "seq", {"template": [f"{sys.executable} -c {{code}}", "wc -c"]})
    record = actors.spawn(
        str(recipe),
        as_="seq",
        values={"code": "import sys; sys.stdout.buffer.write(b'z' * 1000000)"},
    )
    summary = finished(record)
    assert summary["status"] == "done", summary
    result = json.loads(cli("result", "seq", "--json").stdout)
    assert result["output"].strip() == "1000000"  # the whole megabyte reached `wc`
    first = home.run("seq").capture("command-001").stdout
    assert first.stat().st_size <= CAP + 300  # read by its successor, then cut
    events = [json.loads(line) for line in home.run("seq").events.read_text().splitlines()]
    done = [e for e in events if e["event"] == "command.done"]
    assert done[0]["stdout_bytes"] == 1000000


def test_a_secret_split_across_reads_is_masked_at_every_split_point() -> None:
    secret = "SEKRET-SPLIT-4411"
    data = f"a{secret}b{secret}{secret}c".encode()
    for size in range(1, len(data) + 1):
        masker = StreamMasker([secret])
        out = b"".join(masker.feed(data[i : i + size]) for i in range(0, len(data), size))
        out += masker.flush()
        assert out == b"a***b******c", size


def test_a_secret_at_every_offset_of_a_large_output_is_masked(home: StateRoot) -> None:
    secret = "SEKRET-OFFSET-8c2e"
    code = (
        "import sys, os\n"
        "for i in range(3000): os.write(1, b'p' * (i % 97) + b'" + secret + "' + b'q' * (i % 89))\n"
        "os.write(2, b'" + secret + "')"
    )
    record = actors.spawn(
        template=f"{sys.executable} -c {{code}} {{pw}}",
        as_="mask",
        values={"code": code, "pw": secret},
        secret_names=["pw"],
    )
    assert finished(record)["status"] == "done"
    paths = home.run("mask")
    for path in (paths.stdout, paths.stderr, paths.result, *paths.captures.rglob("*")):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    # every occurrence masked, nothing else changed; a long line's continuation break may
    # fall anywhere, inside a mask too (it is placed after masking)
    masked = b"".join(b"p" * (i % 97) + b"***" + b"q" * (i % 89) for i in range(3000))
    assert paths.stdout.read_bytes().replace(CONTINUED, b"") == masked + b"\n"


def test_a_filtered_fold_keeps_nothing_of_other_types(tmp_path: Path) -> None:
    inbox, bells = tmp_path / "inbox.jsonl", tmp_path / "doorbells"
    box = Mailbox(inbox, bells)
    for i in range(3000):
        box.deliver(_envelope(f"d{i}", "job.item", "p" * 1000), fsync=False)
    box.deliver(_envelope("c1", "control.stop", ""), fsync=False)
    runner = Mailbox(inbox, bells, types=("control.stop",))
    assert [e["id"] for e in runner.entries()] == ["c1"]
    assert [e["id"] for e in runner.claim(types=("control.stop",), limit=16)] == ["c1"]
    runner.mark("c1", "handled")
    assert runner.entries()[0]["state"] == "handled"
    assert len(Mailbox(inbox, bells).entries()) == 3001  # the unfiltered fold is whole


def _envelope(ident: str, kind: str, pad: str) -> dict[str, object]:
    return {"id": ident, "type": kind, "to": "run:x", "from": "user:t", "body": {"pad": pad}}


def test_records_of_large_legal_input_stay_bounded(home: StateRoot, tmp_path: Path) -> None:
    names = [f"a{i}" for i in range(9)]
    words = " ".join(f"{{{n}}}" for n in names)
    record = actors.spawn(
        template=f"sh -c 'exit 3' x {words}",
        as_="fat",
        values={n: "w" * 120_000 for n in names},
    )
    summary = finished(record)
    assert summary["status"] == "failed" and summary["code"] == 3, summary
    lines = home.run("fat").events.read_bytes().splitlines()
    assert max(len(line) for line in lines) < 16_384
    started = next(json.loads(x) for x in lines if b'"command.start"' in x)
    assert "more characters cut" in started["command"]
    outbox = home.run("fat").outbox.read_bytes().splitlines()
    assert outbox and max(len(line) for line in outbox) < 16_384

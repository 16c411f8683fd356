"""`actors session register` refuses what cannot work: keys no adapter declares, values
a key does not take, targets that do not answer (issue 18, points 3 and 4)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import actors
from adapters.tmux import TmuxAdapter
from runtime.delivery.contract import common_options
from runtime.delivery.registry import BUILTIN, adapter_class
from runtime.delivery.sessions import load_session
from runtime.store.layout import StateRoot
from tests.adapters.test_tmux import READER, LineTap
from tests.conftest import cli, finished


def refused(*args: str) -> str:
    proc = cli("session", "register", "--id", "s1", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr


def test_unknown_keys_and_bad_values_are_refused_before_anything_is_written(
    home: StateRoot,
) -> None:
    assert "did you mean mode?" in refused("--harness", "file", "-o", "mdoe=manual")
    assert "did you mean secret?" in refused(
        "--harness", "webhook", "-o", "url=http://127.0.0.1:9/x", "-o", "secert=s"
    )
    assert "its options: mode, fallback" in refused("--harness", "file", "-o", "label=x")
    bogus = refused("--harness", "file", "-o", "mode=bogus")
    assert "mode must be one of immediate, next-message, next-tool-call, on-idle, manual" in bogus
    # a mode the adapter does not support is as wrong as a made-up one
    webhook = ("--harness", "webhook", "-o", "url=http://127.0.0.1:9/x")
    assert "one of immediate, on-idle, manual" in refused(*webhook, "-o", "mode=next-message")
    assert "seconds" in refused(*webhook, "-o", "timeout=soon")
    assert "unknown harness 'webhok'" in refused("--harness", "file", "-o", "fallback=webhok")
    assert "webhook needs -o url=" in refused("--harness", "file", "-o", "fallback=webhook")
    assert not home.sessions.exists()


def test_a_fallback_adapter_brings_its_own_keys(home: StateRoot) -> None:
    args = ["-o", "fallback=webhook", "-o", "url=http://127.0.0.1:9/x", "-o", "mode=manual"]
    proc = cli("session", "register", "--harness", "file", "--id", "fb", *args)
    assert proc.returncode == 0, proc.stderr
    assert load_session(home, "fb")["options"]["mode"] == "manual"


_READS = re.compile(r"options(?:\.get\(|\[)\s*\"([a-z_]+)\"")


@pytest.mark.parametrize("harness", sorted(BUILTIN))
def test_every_key_an_adapter_reads_is_declared(harness: str) -> None:
    """The class fix: a key read anywhere in the adapter's module is one registration
    accepts, so no working option can be refused and no read key goes undeclared."""
    cls = adapter_class(harness)
    declared = {o.key for o in (*common_options(cls), *cls.OPTIONS)}
    source = Path(sys.modules[cls.__module__].__file__ or "").read_text()
    read = set(_READS.findall(source))
    assert read <= declared, f"{harness} reads undeclared options {read - declared}"
    for option in cls.OPTIONS:
        assert option.help and (option.kind != "choice" or option.choices), option


def test_the_export_hint_reaches_a_non_terminal_caller(home: StateRoot) -> None:
    proc = cli("session", "register", "--harness", "file", "--id", "agent-1")
    assert proc.returncode == 0 and proc.stdout == "agent-1\n"
    assert "export ACTORS_SESSION=agent-1" in proc.stderr
    as_json = cli("session", "register", "--harness", "file", "--id", "agent-2", "--json")
    assert json.loads(as_json.stdout)["id"] == "agent-2"
    assert "export ACTORS_SESSION=agent-2" in as_json.stderr


def _closed_port() -> int:
    """A port nothing listens on: bound, then released (never listened)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_opencode_url_with_nothing_listening_is_refused_unless_no_check(
    home: StateRoot,
) -> None:
    port = _closed_port()
    args = ["--harness", "opencode", "-o", f"url=http://127.0.0.1:{port}", "-o", "session=ses_a"]
    why = refused(*args)
    assert f"nothing answers at http://127.0.0.1:{port}" in why
    assert f"opencode serve --port {port}" in why and "--no-check" in why
    assert not home.sessions.exists()
    later = cli("session", "register", "--id", "later", "--no-check", *args)
    assert later.returncode == 0, later.stderr
    assert load_session(home, "later")["options"]["url"] == f"http://127.0.0.1:{port}"


def test_a_codex_or_pi_socket_nobody_listens_on_is_refused(home: StateRoot, tmp_path: Path) -> None:
    dead = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX) as left:  # a socket file whose server is gone
        left.bind(str(dead))
    codex = refused("--harness", "codex", "-o", f"socket={dead}", "-o", "thread=t")
    assert "no codex app-server" in codex and "Connection refused" in codex
    assert "no pi host" in refused("--harness", "pi", "-o", f"socket={dead}")
    assert "not on PATH" in refused(
        "--harness", "codex", "-o", "command=codex-nowhere app-server", "-o", "thread=t"
    )


@pytest.fixture
def inside_tmux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, LineTap]]:
    """A tmux server on its own socket path, running a line reader, as the server a user
    registers from (their $TMUX names it); the test process itself is outside tmux, and
    its default server socket points nowhere."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is installed by `make`")
    sock = tmp_path / "srv.sock"
    fifo = tmp_path / "received.fifo"
    os.mkfifo(fifo)
    tap = LineTap(fifo)
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    subprocess.run(
        ["tmux", "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "-s", "agent",
         "-x", "200", "-y", "50", f"{sys.executable} {reader} {fifo}"],
        check=True,
    )  # fmt: skip
    monkeypatch.delenv("TMUX", raising=False)
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path / "elsewhere"))  # no default server there
    (tmp_path / "elsewhere").mkdir()
    yield sock, tap
    subprocess.run(["tmux", "-S", str(sock), "kill-server"], check=False)
    tap.close()


def test_a_pane_registered_from_inside_tmux_is_reached_from_outside(
    home: StateRoot, inside_tmux: tuple[Path, LineTap]
) -> None:
    sock, received = inside_tmux
    # what delivery from outside tmux did before: the default server, which is not there
    unpinned = TmuxAdapter({"id": "x"}, {"target": "agent:0.0"})._pane()
    assert unpinned[0] is False and "error connecting" in unpinned[1]
    inside = {"TMUX": f"{sock},{os.getpid()},0"}  # as tmux sets it in the pane's shell
    proc = cli("session", "register", "--harness", "tmux", "--id", "tx",
               "-o", "target=agent:0.0", env=inside)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert load_session(home, "tx")["options"]["socket_path"] == str(sock)
    record = actors.spawn("hello", session="tx")  # its runner has no $TMUX
    assert finished(record)["status"] == "done"
    assert any(f"Run {record['run']}" in line for line in received.until(record["run"]))


def test_every_secret_named_option_is_in_the_masking_test() -> None:
    from runtime.compiler.redact import is_secret_name
    from tests.reliability.test_leaks_secrets import SECRET_OPTIONS

    keys = {o.key for h in BUILTIN for o in adapter_class(h).OPTIONS if is_secret_name(o.key)}
    assert keys == set(SECRET_OPTIONS)


def test_the_documented_keys_are_the_declared_ones() -> None:
    """docs/delivery.md's table of session options is the adapters' OPTIONS, row by row."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "delivery.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (.*) \|$", text, re.MULTILINE))
    for harness in BUILTIN:
        documented = re.findall(r"`([a-z_]+)`", rows[harness])
        assert documented == [o.key for o in adapter_class(harness).OPTIONS], harness

"""Defects an outside review of runtime/hosts found, each as the test that caught it: a
`host reap` of a live run from any session, a secret left in a command's request file,
a message its sender was told failed delivered later anyway, a placement the host never
started that stayed `placed` for ever. The first tests need no SSH host (a state root
with a host record and a placement is enough); the rest use tests/hosts/netns.py's."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli
from tests.hosts.netns import SshHost


def _fake_host(home: StateRoot, name: str) -> None:
    """A host record as `host add` leaves it, for a host nothing listens at."""
    from runtime.hosts.records import save_host

    record = {
        "name": name, "url": "ssh://127.0.0.1:1", "user": "", "address": "127.0.0.1",
        "port": 1, "actors": "actors", "version": "0", "session": "via-x", "added_at": "",
    }  # fmt: skip
    save_host(home, record)  # type: ignore[arg-type]


def _one_line(done: object) -> None:
    stderr = done.stderr  # type: ignore[attr-defined]
    assert done.returncode == 2, done.stdout + stderr  # type: ignore[attr-defined]
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr


def test_host_reap_of_a_run_that_has_not_ended_is_refused(home: StateRoot) -> None:
    """`host reap RUN` is the run's end's: while RUN is live, anyone calling it is told
    so in one line and its placements stay as they were."""
    from runtime.hosts.records import place

    _fake_host(home, "alpha")
    live = cli("spawn", "-t", "sleep 60", "--as", "run:swarm", "--session", "owner")
    assert live.returncode == 0, live.stderr
    place(home, "alpha", "swarm-worker", "run:swarm")
    record = home.host("alpha").placement("swarm-worker")
    before = record.read_bytes()
    done = cli("host", "reap", "run:swarm", env={"ACTORS_SESSION": "intruder"})
    _one_line(done)
    assert "has not ended" in done.stderr
    assert record.read_bytes() == before


@pytest.mark.parametrize("fault", ["no-ssh", "planted-socket"])
def test_a_message_its_sender_was_told_failed_is_never_delivered_later(
    home: StateRoot, tmp_path: Path, fault: str
) -> None:
    """ssh not on PATH, or a file planted as the host's ssh socket: the sender gets one
    line (exit 2), and its message is withdrawn, not left queued for the next flush
    (which would deliver what the sender will send again)."""
    from runtime.hosts.host import Host
    from runtime.hosts.outbox import messages, pending
    from runtime.hosts.records import place

    _fake_host(home, "alpha")
    place(home, "alpha", "mine", "coord")
    env = {}
    if fault == "no-ssh":
        empty = tmp_path / "bin"
        empty.mkdir()
        env["PATH"] = str(empty)
    else:
        home.host("alpha").control_socket.write_text("not a socket\n")
    done = cli("message", "--session", "coord", "run:alpha/mine", "note", "x", env=env)
    _one_line(done)
    host = Host.load(home, "alpha")
    assert pending(host) == []  # nothing a later flush (the link's, the next message's) sends
    [mine] = messages(host)
    assert mine["state"] == "refused"


def test_a_command_on_a_hosts_secret_stays_only_in_run_json(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """The step's words (a secret among them) reach it through a request file: once the
    run is over, no file of the state root but run.json holds the secret."""
    host = ssh_hosts[1]
    assert cli("host", "add", host.name, host.url).returncode == 0
    recipe = tmp_path / "tokened.json"
    recipe.write_text(
        json.dumps(
            {
                "args": {"api_token": {"type": "string"}},
                "template": [{"host": host.name, "template": "echo {api_token}"}],
            }
        )
    )
    value = "s3cr3t-VALUE-42"
    done = cli(
        "spawn", str(recipe), "-v", f"api_token={value}", "--secret", "api_token",
        "--session", "coord", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run"]
    waited = cli("wait", f"run:{run}", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    holding = [
        str(path.relative_to(ssh_home.path))
        for path in ssh_home.path.rglob("*")
        if path.is_file() and not path.is_symlink() and path.name != "run.json"
        if value.encode() in path.read_bytes()
    ]
    assert holding == []


def test_a_placement_the_host_never_started_ends_as_lost(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """A placer that died between writing the placement and starting the run there:
    stopping it finds no run on the host and ends the placement as `lost`, so nothing
    waits for it (the link, `host rm`, `ls`)."""
    from runtime.hosts.host import Host
    from runtime.hosts.records import outstanding, place, placement
    from runtime.hosts.step import stop_remote

    host = ssh_hosts[1]
    assert cli("host", "add", host.name, host.url).returncode == 0
    place(ssh_home, host.name, "never-started", "run:gone")
    assert stop_remote(Host.load(ssh_home, host.name), "never-started") is False
    ended = placement(ssh_home, host.name, "never-started")
    assert ended is not None and (ended["state"], ended.get("status")) == ("ended", "lost")
    assert outstanding(ssh_home, host.name) == []
    removed = cli("host", "rm", host.name)
    assert removed.returncode == 0, removed.stderr


@pytest.mark.parametrize("verb", ["kill", "cancel"])
def test_a_spawn_the_host_never_started_ends_as_lost_when_stopped(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], verb: str
) -> None:
    """The same for `spawn --host` (its placer a session): `kill` or `cancel` of it says
    what the host said (no such run) and the placement ends `lost`, so `host rm` goes."""
    from runtime.hosts.records import outstanding, place, placement

    host = ssh_hosts[1]
    assert cli("host", "add", host.name, host.url).returncode == 0
    place(ssh_home, host.name, "never-started", "coord")
    stopped = cli(verb, f"run:{host.name}/never-started", "--session", "coord")
    assert stopped.returncode == 2 and "no run never-started" in stopped.stderr, stopped.stderr
    ended = placement(ssh_home, host.name, "never-started")
    assert ended is not None and (ended["state"], ended.get("status")) == ("ended", "lost")
    assert outstanding(ssh_home, host.name) == []
    removed = cli("host", "rm", host.name)
    assert removed.returncode == 0, removed.stderr


def test_host_reap_leaves_a_live_swarms_worker_running(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """Another session's `host reap` of a live run whose worker is out on a real host:
    refused in one line; the worker runs on to its own end (`done`, not killed)."""
    from runtime.hosts.records import placements
    from tests.conftest import make_fifo, read_fifo_line

    host = ssh_hosts[1]
    assert cli("host", "add", host.name, host.url).returncode == 0
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    recipe = tmp_path / "swarm.json"
    recipe.write_text(
        json.dumps(
            {
                "args": {"code": {"type": "string"}},
                "template": [{"host": host.name, "template": "sh -c {code}"}],
            }
        )
    )
    code = f"echo up > {ready}; cat {gate}"
    done = cli("spawn", str(recipe), "-v", f"code={code}", "--session", "coord", "--json")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run"]
    try:
        assert read_fifo_line(ready) == "up"
        reaped = cli("host", "reap", f"run:{run}", env={"ACTORS_SESSION": "intruder"})
        _one_line(reaped)
        assert [p["state"] for p in placements(ssh_home, host.name)] == ["placed"]
    except BaseException:
        _open_gate(gate)  # the worker may be gone (killed): never wait for its reader
        raise
    with open(gate, "w") as w:  # the worker is alive: it reads the gate, its end comes
        w.write("x\n")
    waited = cli("wait", f"run:{run}", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    [ended] = placements(ssh_home, host.name)
    assert ended.get("status") == "done"


def _open_gate(gate: Path) -> None:
    """Let the worker end; a worker already gone (killed) leaves no reader to wait for."""
    with contextlib.suppress(OSError):  # ENXIO: nobody reads the FIFO any more
        fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"x\n")
        finally:
            os.close(fd)

"""The hosts room's known leftovers, each against the real sshd hosts of
tests/hosts/netns.py: a message or a run's step queued for a host `host rm` takes
meanwhile, a delivered-state write that fails after the host took a message, the host
outbox and receipts compacted, and `host ls` asking its hosts at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line, wait_for_change
from tests.hosts.netns import SshHost
from tests.hosts.test_hosts import add


def _paused_at(point: str, barrier: Path, argv: list[str]) -> subprocess.Popen[str]:
    """`actors ARGV`, stopped at `point` (ACTORS_PAUSE_AT: its pid and the point written
    to `barrier`); SIGCONT goes on."""
    env = {**os.environ, "ACTORS_PAUSE_AT": point, "ACTORS_PAUSE_FIFO": str(barrier)}
    pipe = subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "actors", *argv], stdout=pipe, stderr=pipe, text=True, env=env
    )


# -- 2. queuing for a host `host rm` takes meanwhile ------------------------------------------


def test_host_rm_while_a_message_is_queued_leaves_no_ghost(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`host rm --force` while a `message` to a run there is about to queue: the message
    finds the host gone (one line, exit 2), and no `hosts/<name>/` is made again by its
    write (a ghost holding a message no link will send, which a later `host add` of the
    name would inherit)."""
    from runtime.hosts.records import place

    host = ssh_hosts[1]
    add(host)
    place(ssh_home, host.name, "run-m", "coord")
    barrier = make_fifo(tmp_path / "barrier")
    argv = ["message", f"run:{host.name}/run-m", "note", "hi", "--session", "coord"]
    with _paused_at("hosts.outbox.before_queue", barrier, argv) as sending:
        try:
            pid, point = read_fifo_line(barrier, timeout=60).split()
            assert point == "hosts.outbox.before_queue"
            removed = cli("host", "rm", host.name, "--force")
            assert removed.returncode == 0, removed.stderr
            os.kill(int(pid), signal.SIGCONT)
            out, err = sending.communicate(timeout=60)
        finally:
            sending.kill()
    assert sending.returncode == 2, out + err
    assert err.count("\n") == 1 and f"no host '{host.name}'" in err, err
    assert not ssh_home.host(host.name).dir.exists()


def test_host_rm_while_a_swarms_step_starts_leaves_no_ghost(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`host rm` while a swarm's worker step is about to open its doorbell on the host:
    the step finds the host gone and fails with the reason in one line (the swarm ends),
    nothing starts on the host, and no `hosts/<name>/doorbells/` is made again."""
    host = ssh_hosts[1]
    add(host)
    barrier = make_fifo(tmp_path / "barrier")
    env = {"ACTORS_PAUSE_AT": "hosts.step.before_doorbells", "ACTORS_PAUSE_FIFO": str(barrier)}
    done = cli(
        "spawn", "swarm", "-v", "workers=1", "-v", f"hosts={host.name}",
        "-v", "cmd=echo ghost-step-ran", "--session", "coord", "--json", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run"]
    pid, point = read_fifo_line(barrier, timeout=60).split()
    assert point == "hosts.step.before_doorbells"
    removed = cli("host", "rm", host.name)
    assert removed.returncode == 0, removed.stderr
    os.kill(int(pid), signal.SIGCONT)
    waited = cli("wait", f"run:{run}", "--timeout", "60")
    assert waited.returncode not in (0, 75), waited.stdout + waited.stderr
    said = cli("result", f"run:{run}").stdout + cli("status", f"run:{run}").stdout
    assert f"no host '{host.name}'" in said, said
    assert not ssh_home.host(host.name).dir.exists()
    assert not any("ghost-step-ran" in p for p in host.processes())


# -- 3. the delivered state not written here after the host took the message ------------------


def test_a_message_the_host_took_is_not_doubled_when_its_state_cannot_be_written(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """The host delivered the message and answered; then writing its `delivered` state
    here fails (the host's files here read-only: a real fault, a read-only bind mount).
    The sender is told what the host said (delivered, exit 0) and not to resend, never
    that it failed: a sender that resends what it was told did not go would double it.
    The next send records the host's answer to the first (a repeat) and delivers its
    own: each once, in order."""
    from runtime.hosts.host import Host
    from runtime.hosts.outbox import messages
    from tests.hosts.test_hosts import _idle_run, _items, message

    host = ssh_hosts[1]
    add(host)
    address, inbox = _idle_run(host, "rofs")
    barrier = make_fifo(tmp_path / "barrier")
    folder = str(ssh_home.host(host.name).dir)
    argv = ["message", address, "job.item", '{"n": 1}', "--body-json", "--session", "coord"]
    with _paused_at("hosts.outbox.before_mark", barrier, argv) as sender:
        mounted = False
        try:
            pid, point = read_fifo_line(barrier, timeout=60).split()
            assert point == "hosts.outbox.before_mark"  # the host has answered: it has it
            subprocess.run(["mount", "--bind", folder, folder], check=True, timeout=30)
            mounted = True
            subprocess.run(["mount", "-o", "remount,bind,ro", folder], check=True, timeout=30)
            os.kill(int(pid), signal.SIGCONT)
            out, err = sender.communicate(timeout=60)
        finally:
            sender.kill()
            if mounted:
                subprocess.run(["umount", folder], check=True, timeout=30)
    if sender.returncode != 0:  # what a careful sender does when told it did not go
        assert message(address, 1).returncode == 0
    assert _items(inbox) == [1], out + err
    assert sender.returncode == 0, out + err
    assert "state=queued" in out and "route=run" in out, out
    assert err.count("\n") == 1 and "do not resend" in err, err
    assert message(address, 2).returncode == 0
    assert _items(inbox) == [1, 2]
    sent = messages(Host.load(ssh_home, host.name))
    assert [m["state"] for m in sent] == ["delivered", "delivered"]
    assert sent[0]["answer"].get("repeat") is True
    assert cli("kill", address, "--session", "coord").returncode == 0


# -- 4. the host outbox and the host's receipts compacted -------------------------------------

CAP = 8192
"""The journal cap of this test, here and on the host (ACTORS_JOURNAL_CAP_BYTES)."""


def _sshd_down(host: SshHost) -> None:
    """Every sshd process of the host killed (its listener and each connection's): a
    connection to it is refused at once, and the open ones end."""
    listed = host.ns_run("ps", "-eo", "pid=,comm=").stdout.splitlines()
    sshds = [line.split()[0] for line in listed if line.split()[1:] == ["sshd"]]
    assert sshds and host.ns_run("kill", "-KILL", *sshds).returncode == 0


def _sshd_up(host: SshHost) -> None:
    from tests.hosts.netns import SSHD, _wait_port

    started = host.ns_run(str(SSHD), "-f", str(host.base / "etc/sshd_config"))
    assert started.returncode == 0, started.stderr
    _wait_port(host)


def test_the_host_outbox_and_receipts_are_compacted_losing_and_doubling_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path, monkeypatch
) -> None:
    """With a journal cap of 8 KiB here and on the host: messages delivered, then queued
    while the host's sshd is down, then a flush of that queue whose sender is killed once
    the host answered (the host has them, nothing of it is recorded here), then more.
    The outbox here and the receipts there are compacted (a marker, a bounded size):
    every message reaches the run once, in order, none still queued is lost, and the
    messages the host had taken are answered as repeats from its receipts."""
    from runtime.hosts.host import Host
    from runtime.hosts.outbox import messages
    from runtime.store.reads import read_jsonl
    from tests.hosts.conftest import stop_links_and_masters
    from tests.hosts.test_hosts import _idle_run, _items, message

    host = ssh_hosts[0]
    monkeypatch.setenv("ACTORS_JOURNAL_CAP_BYTES", str(CAP))
    script = tmp_path / "capped-actors"
    script.write_text(f'#!/bin/sh\nACTORS_JOURNAL_CAP_BYTES={CAP} exec actors "$@"\n')
    script.chmod(0o755)
    tmp_path.chmod(0o755)
    added = cli("host", "add", host.name, host.url, "--actors", str(script))
    assert added.returncode == 0, added.stderr
    address, inbox = _idle_run(host, "compact")
    sent = 0
    for _ in range(30):  # delivered, the outbox past its cap
        sent += 1
        done = message(address, sent)
        assert done.returncode == 0 and "state=queued" in done.stdout, done.stdout + done.stderr
    _sshd_down(host)
    try:
        for _ in range(30):  # queued here, past the cap again
            sent += 1
            done = message(address, sent)
            assert done.returncode == 0 and done.stdout.startswith("queued for"), done.stderr
        stop_links_and_masters(ssh_home)  # the next flush is the one below
    finally:
        _sshd_up(host)
    queue = [m["key"] for m in messages(Host.load(ssh_home, host.name)) if m["state"] == "queued"]
    assert len(queue) == 30
    session = json.loads(ssh_home.host(host.name).record.read_text())["session"]
    receipts = host.state / "sessions" / session / "host-receipts.jsonl"

    def receipt_keys() -> list[str]:
        return [str(r.get("key")) for r in read_jsonl(receipts).records]

    def taken_from(first: str, count: int) -> bool:
        keys = receipt_keys()
        return first in keys and len(keys) - keys.index(first) == count

    barrier = make_fifo(tmp_path / "barrier")
    sent += 1
    argv = ["message", address, "job.item", json.dumps({"n": sent}), "--body-json"]
    with _paused_at("hosts.outbox.before_mark", barrier, [*argv, "--session", "coord"]) as cut:
        try:
            _, point = read_fifo_line(barrier, timeout=60).split()
            assert point == "hosts.outbox.before_mark"  # the host answered the first
            # the host takes the rest of the channel's messages (the whole queue and this
            # one), its receipts passing their cap meanwhile; nothing is recorded here
            wait_for_change(
                receipts.parent, lambda: taken_from(queue[0], 31), timeout=60,
                what="the host took the whole queue",
            )  # fmt: skip
        finally:
            cut.kill()
    kept = receipt_keys()
    assert (read_jsonl(receipts).compaction or {}).get("dropped_total", 0) > 0
    assert kept[: len(queue)] == queue  # compacted: every receipt still needed is kept
    sent += 1
    assert message(address, sent).returncode == 0  # carries the queue again: repeats there
    again = receipt_keys()
    assert again[: len(queue)] == queue and len(again) == len(set(again)) == 32
    for _ in range(9):
        sent += 1
        assert message(address, sent).returncode == 0
    assert _items(inbox) == list(range(1, sent + 1))
    outbox = ssh_home.host(host.name).outbox
    assert outbox.stat().st_size < 3 * CAP
    assert (read_jsonl(outbox).compaction or {}).get("dropped_total", 0) > 0
    found = messages(Host.load(ssh_home, host.name))
    assert {m["state"] for m in found} == {"delivered"}
    assert [m["body"]["n"] for m in found] == sorted(m["body"]["n"] for m in found)
    assert found[-1]["body"]["n"] == sent
    assert receipts.stat().st_size < 3 * CAP
    assert cli("kill", address, "--session", "coord").returncode == 0


# -- 5. host ls asks its hosts at once ---------------------------------------------------------


def test_host_ls_asks_unreachable_hosts_at_once_not_one_after_the_other(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """Both hosts blackholed (inside each host's network, a route that drops its answers
    to us: our SYN goes unanswered, as for a host that is gone): `host ls` says both
    cannot be reached, in the hosts' order, within about one connect timeout (they are
    asked at once), not one after the other (two of them)."""
    import time

    from runtime.hosts.ssh import CONNECT_TIMEOUT_S
    from tests.hosts.conftest import stop_links_and_masters

    for host in ssh_hosts:
        add(host)
    stop_links_and_masters(ssh_home)  # no open connection: each is a new connect
    holes = []
    try:
        for host in ssh_hosts:
            head, _, last = host.address.rpartition(".")
            gateway = f"{head}.{int(last) - 1}/32"
            argv = ["ip", "-n", host.netns, "route", "add", "blackhole", gateway]
            subprocess.run(argv, check=True, capture_output=True, timeout=30)
            holes.append((host.netns, gateway))
        started = time.monotonic()
        listed = cli("host", "ls", "--json", timeout=120)
        took = time.monotonic() - started
    finally:
        for netns, gateway in holes:
            argv = ["ip", "-n", netns, "route", "del", "blackhole", gateway]
            subprocess.run(argv, check=True, capture_output=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["reachable"]) for r in rows] == [("alpha", False), ("beta", False)]
    assert all("timed out" in r["why"] for r in rows), rows
    assert CONNECT_TIMEOUT_S * 0.9 <= took < CONNECT_TIMEOUT_S * 1.6, took


def test_host_rm_while_a_run_is_starting_there_is_said_as_that(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`host rm --force` between the host's answer (the run is going there) and the link
    that would carry its end home: one line saying the host was removed while the run was
    starting and that it goes on there, not `no host NAME; add it` (a name never added).
    A swarm's step says the same in its own words (CI caught the race there)."""
    host = ssh_hosts[1]
    add(host)
    barrier = make_fifo(tmp_path / "barrier")
    argv = ["spawn", "--host", host.name, "--as", "run-r", "-t", "true", "--session", "coord"]
    with _paused_at("hosts.spawn.before_link", barrier, argv) as spawning:
        try:
            pid, point = read_fifo_line(barrier, timeout=60).split()
            assert point == "hosts.spawn.before_link"
            removed = cli("host", "rm", host.name, "--force")
            assert removed.returncode == 0, removed.stderr
            os.kill(int(pid), signal.SIGCONT)
            out, err = spawning.communicate(timeout=60)
        finally:
            spawning.kill()
    assert spawning.returncode == 2, out + err
    assert err.count("\n") == 1, err
    assert f"host {host.name} was removed (host rm) while run:{host.name}/run-r" in err, err
    assert not ssh_home.host(host.name).dir.exists()

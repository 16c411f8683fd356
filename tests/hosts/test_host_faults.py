"""Faults of a host, in the slow tier: the host rebooted (every process of it gone at
once, its files kept) while a run placed there was running."""

from __future__ import annotations

import json

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line, wait_for_change
from tests.hosts.netns import SshHost, reboot, restart_sshd
from tests.hosts.test_hosts import add, followups, spawn

pytestmark = pytest.mark.slow


def test_a_rebooted_host_reports_its_dead_run_once(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    host = ssh_hosts[1]
    add(host)
    ready = make_fifo(host.base / "ready-reboot")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec sleep 31339'")
    assert read_fifo_line(ready) == "up"
    reboot(host)
    assert not any("sleep 31339" in p for p in host.processes())
    # the link reconnects to the new sshd; the host's side folds the dead run
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "90").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == address and envelope["type"] == "run.exited"
    status = json.loads(cli("status", address, "--json").stdout)
    assert status["status"] == "exited"
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    wait_for_change(placement.parent, lambda: json.loads(placement.read_text())["state"] == "ended")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "2").returncode == 75


def test_the_hosts_actors_killed_loses_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: object
) -> None:
    """`actors host serve` on the host SIGKILLed mid-run: the link reconnects, the run's
    follow-up comes once."""
    host = ssh_hosts[0]
    add(host)
    ready, gate = make_fifo(host.base / "ready-serve"), make_fifo(host.base / "gate-serve")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec cat {gate}'")
    assert read_fifo_line(ready) == "up"
    session = json.loads(ssh_home.host(host.name).record.read_text())["session"]
    bells = host.state / "sessions" / session / "doorbells"

    def serving() -> list[str]:
        listed = host.ns_run("ps", "-ww", "-eo", "pid=,args=").stdout.splitlines()
        return [line.split()[0] for line in listed if "host serve" in line]

    # the link's channel is up once `host serve` has armed its doorbell on the host
    wait_for_change(host.state, lambda: bells.is_dir() and any(bells.iterdir()) and serving())
    assert host.ns_run("kill", "-KILL", *serving()).returncode == 0
    with open(gate, "w") as w:
        w.write("after\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "90").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == address and envelope["type"] == "run.done"
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    wait_for_change(placement.parent, lambda: json.loads(placement.read_text())["state"] == "ended")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "2").returncode == 75


def test_sshd_restarted_mid_run_loses_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """Every connection to the host cut by an sshd restart: the run goes on there, the
    link reconnects, the follow-up comes once."""
    host = ssh_hosts[0]
    add(host)
    ready, gate = make_fifo(host.base / "ready-sshd"), make_fifo(host.base / "gate-sshd")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec cat {gate}'")
    assert read_fifo_line(ready) == "up"
    restart_sshd(host)
    assert any(f"cat {gate}" in p for p in host.processes())
    with open(gate, "w") as w:
        w.write("after restart\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "90").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == address and envelope["type"] == "run.done"
    assert "after restart" in cli("result", address).stdout
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    wait_for_change(placement.parent, lambda: json.loads(placement.read_text())["state"] == "ended")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "2").returncode == 75


def test_the_link_cut_for_a_minute_with_messages_queued_loses_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """A minute without the link: messages queue here (each told so), the run goes on
    there; the link back: the messages reach its mailbox in order, each once, and the
    run's follow-up comes home once when it ends."""
    import time

    from tests.hosts.test_hosts import _items, message

    host = ssh_hosts[1]
    add(host)
    ready, gate = make_fifo(host.base / "ready-minute"), make_fifo(host.base / "gate-minute")
    recipe = {
        "mailbox": {"accepts": ["job.item"]},
        "template": 'sh -c \'echo ready > "$1"; exec cat "$2"\' x {r} {g}',
    }
    (host.home / "config" / "actors" / "recipes" / "gated.json").write_text(json.dumps(recipe))
    address = spawn(host, "gated", "-v", f"r={ready}", "-v", f"g={gate}")
    assert read_fifo_line(ready) == "ready"
    inbox = host.state / "runs" / address.split("/")[1] / "inbox.jsonl"
    queued = f"queued for {host.name} (unreachable): delivered when the link returns\n"
    cut = time.monotonic()
    host.link(False)
    try:
        for n in (1, 2, 3):
            sent = message(address, n)
            assert sent.returncode == 0 and sent.stdout == queued, sent.stderr
        assert _items(inbox) == []
        time.sleep(max(0.0, 60 - (time.monotonic() - cut)))  # the fault: a minute's cut
    finally:
        host.link(True)
    wait_for_change(inbox.parent, lambda: _items(inbox) == [1, 2, 3], timeout=180)
    with open(gate, "w") as w:
        w.write("after the cut\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "120").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == address and envelope["type"] == "run.done"
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    wait_for_change(placement.parent, lambda: json.loads(placement.read_text())["state"] == "ended")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "2").returncode == 75
    assert _items(inbox) == [1, 2, 3]

"""`actors host` and runs on hosts, against two real sshd hosts (tests/hosts/netns.py):
each its own network, PID and mount namespaces, host keys checked strictly."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo
from tests.hosts.netns import SshHost


def add(host: SshHost) -> None:
    done = cli("host", "add", host.name, host.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"host {host.name}: {host.address} actors ")


def test_add_ls_rm_two_hosts(ssh_home: StateRoot, ssh_hosts: list[SshHost]) -> None:
    for host in ssh_hosts:
        add(host)
    listed = json.loads(cli("host", "ls", "--json").stdout)
    assert [(h["name"], h["reachable"], h["runs"]) for h in listed] == [
        ("alpha", True, 0),
        ("beta", True, 0),
    ]
    assert all(h["version"] == listed[0]["version"] != "" for h in listed)
    record = ssh_home.host("alpha").record
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    assert json.loads(record.read_text())["address"] == ssh_hosts[0].address
    again = cli("host", "add", "alpha", ssh_hosts[0].url)
    assert again.returncode == 2 and "host 'alpha' exists" in again.stderr
    ssh_hosts[0].link(up=False)
    try:
        cut = json.loads(cli("host", "ls", "--json", timeout=90).stdout)
    finally:
        ssh_hosts[0].link(up=True)
    assert (cut[0]["reachable"], cut[1]["reachable"]) == (False, True)
    assert cli("host", "rm", "alpha").returncode == 0
    assert [h["name"] for h in json.loads(cli("host", "ls", "--json").stdout)] == ["beta"]
    assert not ssh_home.host("alpha").dir.exists()


def test_changed_host_key_is_refused_with_the_fix(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    known = tmp_path / "known_hosts"
    other = tmp_path / "other_key"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    known.write_text(f"{host.address} {' '.join(Path(f'{other}.pub').read_text().split()[:2])}\n")
    done = cli("host", "add", host.name, host.url)
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1
    assert "not the one in known_hosts" in done.stderr
    assert f"ssh-keygen -R '{host.address}'" in done.stderr
    assert not ssh_home.hosts.exists() or not any(ssh_home.hosts.iterdir())


@pytest.mark.parametrize(
    "url",
    ["http://x", "ssh://", "ssh://-oProxyCommand=x", "ssh://a b", "ssh://h:99999", "ssh://u@h:p"],
)
def test_bad_url_is_one_line(ssh_home: StateRoot, url: str) -> None:
    done = cli("host", "add", "h1", url)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "ssh://[user@]host[:port]" in done.stderr
    assert not ssh_home.hosts.exists() or not any(ssh_home.hosts.iterdir())


def test_bad_host_name_is_one_line(ssh_home: StateRoot, ssh_hosts: list[SshHost]) -> None:
    for name in ("../x", "x:y", "a/b", ".hidden", "a\x1b[2J"):
        done = cli("host", "add", name, ssh_hosts[0].url)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def spawn(host: SshHost, *args: str, session: str = "coord") -> str:
    done = cli("spawn", "--host", host.name, "--session", session, *args, "--json")
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout)
    assert started["address"] == f"run:{host.name}/{started['run']}"
    return str(started["address"])


def followups(session: str = "coord") -> list[dict]:
    return json.loads(cli("inbox", "read", "--session", session, "--json").stdout)


def test_runs_on_two_hosts_come_back_once(ssh_home: StateRoot, ssh_hosts: list[SshHost]) -> None:
    for host in ssh_hosts:
        add(host)
    addresses = [spawn(h, "-t", f"echo from-{h.name}") for h in ssh_hosts]
    got: list[dict] = []
    while len(got) < 2:
        assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
        got += followups()
    assert sorted(e["from"] for e in got) == sorted(addresses)
    for envelope in got:
        assert envelope["type"] == "run.done"
        assert envelope["session"] == "coord"
        assert envelope["body"]["run"] == envelope["from"]
        assert f"actors result {envelope['from']}" in envelope["summary"]
    for host, address in zip(ssh_hosts, addresses, strict=True):
        result = cli("result", address)
        assert result.returncode == 0 and f"from-{host.name}" in result.stdout
        status = json.loads(cli("status", address, "--json").stdout)
        assert status["status"] == "done"
        assert cli("wait", address).returncode == 0
    # exactly once: the relays are gone (nothing out) and nothing more arrives
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "1").returncode == 75
    listed = cli("ls", "--json")
    assert listed.returncode == 0


def test_kill_on_a_host_leaves_nothing_there(ssh_home: StateRoot, ssh_hosts: list[SshHost]) -> None:
    host = ssh_hosts[1]
    add(host)
    address = spawn(host, "-t", "sleep 31337")
    assert cli("wait", address, "--timeout", "0").returncode == 75  # running there
    assert any("sleep 31337" in p for p in host.processes())
    other = cli("kill", address, "--session", "someone-else")
    assert other.returncode == 2 and "belongs to session coord" in other.stderr
    killed = cli("kill", address, "--session", "coord")
    assert killed.returncode == 0, killed.stderr
    assert not any("sleep 31337" in p for p in host.processes())
    assert json.loads(cli("status", address, "--json").stdout)["status"] == "killed"


def test_dropped_connection_kills_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    add(host)
    gate = make_fifo(tmp_path / "gate")
    address = spawn(host, "-t", f"cat {gate}")
    assert any(f"cat {gate}" in p for p in host.processes())
    host.link(up=False)  # the connection drops (the relay and the master lose it)
    try:
        assert cli("status", address).returncode == 3  # unreachable, one line
        assert any(f"cat {gate}" in p for p in host.processes())  # the run goes on there
        with open(gate, "w") as w:
            w.write("released\n")
    finally:
        host.link(up=True)
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "90").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == address and envelope["type"] == "run.done"
    assert "released" in cli("result", address).stdout


def test_unknown_remote_run_and_bad_addresses(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    add(ssh_hosts[0])
    missing = cli("status", "run:alpha/nope")
    assert missing.returncode == 2 and "no run nope placed on host alpha" in missing.stderr
    for bad in ("run:alpha/../x", "run:../alpha/x", "run:alpha/\x1b[31m"):
        done = cli("status", bad)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "\x1b" not in done.stderr
    nohost = cli("status", "run:gamma/x")
    assert nohost.returncode == 2 and "no host 'gamma'" in nohost.stderr

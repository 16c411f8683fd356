"""`actors host` and runs on hosts, against two real sshd hosts (tests/hosts/netns.py):
each its own network, PID and mount namespaces, host keys checked strictly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line
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
    ready = make_fifo(host.base / "ready-kill")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec sleep 31337'")
    assert read_fifo_line(ready) == "up"  # running there
    assert any("sleep 31337" in p for p in host.processes())
    other = cli("kill", address, "--session", "someone-else")
    assert other.returncode == 2 and "belongs to coord" in other.stderr
    killed = cli("kill", address, "--session", "coord")
    assert killed.returncode == 0, killed.stderr
    assert not any("sleep 31337" in p for p in host.processes())
    assert json.loads(cli("status", address, "--json").stdout)["status"] == "killed"


def test_dropped_connection_kills_nothing(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec cat {gate}'")
    assert read_fifo_line(ready) == "up"
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


def test_ls_has_a_host_column(ssh_home: StateRoot, ssh_hosts: list[SshHost]) -> None:
    add(ssh_hosts[0])
    address = spawn(ssh_hosts[0], "-t", "sleep 31338")  # "placed" here whatever it does
    local = cli("spawn", "-t", "true", "--json")
    assert local.returncode == 0
    table = cli("ls").stdout.splitlines()
    assert table[0].split() == [
        "RUN",
        "STATUS",
        "STARTED",
        "DURATION",
        "CODE",
        "RECIPE",
        "ACTIVE",
        "HOST",
    ]
    mine = next((line for line in table if line.startswith(address)), "\n".join(table))
    assert mine.split()[1] == "placed" and mine.split()[-1] == "alpha"
    rows = json.loads(cli("ls", "--json").stdout)
    assert {r["run"]: r.get("host") for r in rows}[address] == "alpha"
    assert cli("kill", address, "--session", "coord").returncode == 0
    after = {r["run"]: r["status"] for r in json.loads(cli("ls", "--json").stdout)}
    assert after[address] == "killed"


def test_a_lost_ack_delivers_once(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link dies after the follow-up is durable here, before the host has its ack:
    the host sends it again to the next link, and the session keeps one copy."""
    import signal

    host = ssh_hosts[1]
    add(host)
    barrier = make_fifo(tmp_path / "barrier")
    monkeypatch.setenv("ACTORS_PAUSE_AT", "hosts.relay.before_ack")
    monkeypatch.setenv("ACTORS_PAUSE_FIFO", str(barrier))
    address = spawn(host, "-t", "echo once")
    pid, point = read_fifo_line(barrier, timeout=60).split()
    assert point == "hosts.relay.before_ack"
    os.kill(int(pid), signal.SIGKILL)
    monkeypatch.delenv("ACTORS_PAUSE_AT")
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    assert json.loads(placement.read_text())["state"] == "placed"  # not acked: still out
    # the session's wait brings the link back; it relays the same follow-up again
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    from tests.conftest import wait_for_change

    wait_for_change(
        placement.parent,
        lambda: json.loads(placement.read_text())["state"] == "ended",
        timeout=60,
        what="the relayed follow-up acked",
    )
    [envelope] = followups()
    assert envelope["from"] == address and envelope["body"]["result"]["body"] == "once\n"
    journal = (ssh_home.path / "sessions" / "coord" / "inbox.jsonl").read_text()
    assert sum('"envelope"' in line for line in journal.splitlines()) == 1


def test_a_host_cannot_deliver_for_runs_it_was_not_given(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """A follow-up in the host's inbox for a run this root never placed is refused."""
    host = ssh_hosts[0]
    add(host)
    record = json.loads(ssh_home.host(host.name).record.read_text())
    forged = host_cli(host, "spawn", "-t", "echo forged", "--session", record["session"], "--json")
    assert forged.returncode == 0, forged.stderr
    gate = make_fifo(tmp_path / "gate")
    address = spawn(host, "-t", f"cat {gate}")
    with open(gate, "w") as w:
        w.write("real\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    placement = ssh_home.host(host.name).placement(address.split("/")[1])
    from tests.conftest import wait_for_change

    wait_for_change(placement.parent, lambda: json.loads(placement.read_text())["state"] == "ended")
    got = followups()
    assert [e["from"] for e in got] == [address]
    log = ssh_home.host(host.name).link_log.read_text()
    assert "refused a follow-up from 'run:run-" in log


def host_cli(host: SshHost, *args: str) -> subprocess.CompletedProcess[str]:
    """The host's own actors, run inside its namespaces (as its user would)."""
    env = [f"XDG_STATE_HOME={host.home}/state", f"XDG_DATA_HOME={host.home}/data"]
    return host.ns_run("env", "-u", "ACTORS_HOME", *env, "actors", *args)


def test_a_hostile_value_is_one_argument_on_the_host(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """ssh hands the remote shell one string: every argument is quoted on its own."""
    host = ssh_hosts[1]
    add(host)
    marker = tmp_path / "pwned"
    hostile = f"a'; touch {marker}; echo '$(touch {marker})`touch {marker}`\x1b[2J"
    address = spawn(host, "-t", "printf %s {v=x}", "-v", f"v={hostile}")
    assert cli("wait", address, "--timeout", "60").returncode == 0
    out = cli("tail", address)
    assert out.returncode == 0
    assert f"touch {marker}" in out.stdout and "\x1b" not in out.stdout
    assert not marker.exists()


def test_install_puts_this_version_on_the_host_over_ssh(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """--install: the wheels made from this install, sent over the connection, installed
    with pip --no-index in the host's own venv (the host namespace reaches nothing but
    the coordinator: no index could be used)."""
    host = ssh_hosts[1]
    done = cli("host", "add", host.name, host.url, "--install", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    venv = host.home / "data" / "actors" / "venv"
    assert record["actors"] == str(venv / "bin" / "actors")
    assert (venv / "bin" / "actors").exists()
    assert not list(venv.glob("lib/python3*/site-packages/__editable__*"))  # a real copy
    assert list(venv.glob("lib/python3*/site-packages/runtime/hosts/link.py"))
    address = spawn(host, "-t", "echo installed")
    assert cli("wait", address, "--timeout", "60").returncode == 0
    assert "installed" in cli("result", address).stdout


def test_one_connection_per_host_carries_everything(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """host add, spawn, the link's channel, status, result, tail: one TCP connection."""
    host = ssh_hosts[0]

    def connections() -> set[str]:
        found = host.ns_run("ss", "-Htn", "state", "established", "( sport = :22 )").stdout
        return {line.split()[-1] for line in found.splitlines()}  # the client's address:port

    before = connections()  # (none of this test's)
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    address = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec cat {gate}'")
    assert read_fifo_line(ready) == "up"
    for verb in ("status", "tail", "inspect"):
        assert cli(verb, address).returncode == 0
    assert len(connections() - before) == 1
    with open(gate, "w") as w:
        w.write("x\n")
    assert cli("wait", address, "--timeout", "60").returncode == 0


def test_message_to_a_remote_run_lands_in_its_mailbox_there(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """A recipe of the host's own library; the message is durable in the run's inbox on
    the host; only the placing session may send (unless --force)."""
    host = ssh_hosts[0]
    add(host)
    ready = make_fifo(host.base / "ready-msg")
    recipe = {
        "mailbox": {"accepts": ["job.item"]},
        "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' x {f}",
    }
    (host.home / "config" / "actors" / "recipes" / "idle.json").write_text(json.dumps(recipe))
    address = spawn(host, "idle", "-v", f"f={ready}")
    assert read_fifo_line(ready) == "ready"
    sent = cli("message", address, "job.item", '{"n": 1}', "--body-json", "--session", "coord")
    assert sent.returncode == 0, sent.stderr
    inbox = host.state / "runs" / address.split("/")[1] / "inbox.jsonl"
    assert '"job.item"' in inbox.read_text() and '"n": 1' in inbox.read_text().replace(
        '":1', '": 1'
    )
    # a body that must follow `--` (it starts with '-'), and one that reads --session:
    # the host is given its session before them, and they stay the body
    for body in ("-n 2", "--session"):
        dashed = cli("message", "--session", "coord", address, "job.item", "--", body)
        assert dashed.returncode == 0, dashed.stderr
        assert json.dumps(body) in inbox.read_text()
    refused = cli("message", address, "job.item", "x", "--session", "intruder")
    assert refused.returncode == 2 and "belongs to coord" in refused.stderr
    wrong = cli("message", address, "not.accepted", "x", "--session", "coord")
    assert wrong.returncode == 2 and wrong.stderr.startswith("actors: on host alpha: ")
    assert cli("kill", address, "--session", "coord").returncode == 0


def test_the_entry_knows_every_remote_verb() -> None:
    """actors.cli's import-free check and runtime.hosts.remote list the same verbs."""
    from actors.cli import _REMOTE_VERBS
    from runtime.hosts.remote import REMOTE_VERBS

    assert _REMOTE_VERBS == REMOTE_VERBS


def test_a_hostile_hosts_lines_are_bounded(home: StateRoot) -> None:
    """What a host writes on the link's channel is read in bounded lines: a huge line, a
    deep one, a non-follow-up are dropped (logged), the follow-up after them is read."""
    import threading

    from runtime.hosts.host import Host
    from runtime.hosts.link import MAX_LINE, _entries
    from runtime.hosts.records import save_host

    record = {
        "name": "evil", "url": "ssh://h", "user": "", "address": "h", "port": 22,
        "actors": "actors", "version": "0", "session": "via-x", "added_at": "",
    }  # fmt: skip
    save_host(home, record)  # type: ignore[arg-type]
    host = Host.load(home, "evil")
    read, write = os.pipe()
    good = {"followup": {"id": "1", "envelope": {"from": "run:x"}}}
    lines = [
        b"x" * (MAX_LINE + 10) + b"\n",
        b'{"followup": ' + b"[" * 10000 + b"]" * 10000 + b"}\n",
        b'{"not": "a follow-up"}\n',
        b"\xff\xfe\n",
        json.dumps(good).encode() + b"\n",
    ]

    def feed() -> None:
        with os.fdopen(write, "wb") as out:
            for line in lines:
                out.write(line)

    feeder = threading.Thread(target=feed)
    feeder.start()
    with os.fdopen(read, "rb") as stream:
        got = list(_entries(host, stream))
    feeder.join()
    assert got == [good["followup"]]
    log = host.paths.link_log.read_text()
    assert "longer than" in log and log.count("not a follow-up") == 3


def test_rm_refuses_while_runs_are_out_and_force_touches_nothing_there(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[1]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    spawn(host, "-t", f"sh -c 'echo up > {ready}; exec cat {gate}'")
    assert read_fifo_line(ready) == "up"
    refused = cli("host", "rm", host.name)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "still has 1 run(s) placed from here" in refused.stderr
    assert ssh_home.host(host.name).record.exists()
    assert cli("host", "rm", host.name, "--force").returncode == 0
    assert not ssh_home.host(host.name).dir.exists()
    assert any(f"cat {gate}" in p for p in host.processes())  # the run goes on there
    with open(gate, "w") as w:
        w.write("x\n")


@pytest.mark.parametrize("planted", ["hosts", "hosts/alpha", "hosts/alpha/runs"])
def test_a_planted_symlink_is_never_followed(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path, planted: str
) -> None:
    add(ssh_hosts[0])
    elsewhere = tmp_path / "elsewhere"
    target = ssh_home.path / planted
    if planted == "hosts/alpha/runs":
        target.mkdir(exist_ok=True)
    os.rename(target, elsewhere)
    target.symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.rglob("*"))
    done = cli("spawn", "--host", "alpha", "-t", "true", "--session", "coord")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "symlink" in done.stderr
    assert sorted(p.name for p in elsewhere.rglob("*")) == before


def test_tail_follows_and_cancel_stops_a_remote_run(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    address = spawn(host, "-t", f"sh -c 'echo first; echo up > {ready}; cat {gate}; echo last'")
    assert read_fifo_line(ready) == "up"
    follow = subprocess.Popen(
        [sys.executable, "-m", "actors", "tail", address, "-f"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert follow.stdout is not None
    assert follow.stdout.readline().strip() == "first"  # streamed while the run is live
    with open(gate, "w") as w:
        w.write("middle\n")
    rest = follow.communicate(timeout=60)[0]
    assert follow.returncode == 0 and rest.split() == ["middle", "last"]
    second = spawn(host, "-t", "sleep 31340")
    assert cli("cancel", second, "--session", "coord", "--grace", "1").returncode == 0
    assert json.loads(cli("status", second, "--json").stdout)["status"] == "cancelled"
    assert not any("sleep 31340" in p for p in host.processes())


def test_a_recipe_file_here_runs_there(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`--recipe FILE` (or a RECIPE that is a path) is this machine's file: its content is
    sent, the host runs it under the file's name, with the values given here."""
    host = ssh_hosts[1]
    add(host)
    recipe = tmp_path / "greet.json"
    recipe.write_text(json.dumps({"template": "printf %s {greeting=hello}"}))
    address = spawn(host, "--recipe", str(recipe), "-v", "greeting=from here")
    assert address.startswith(f"run:{host.name}/greet-")
    assert cli("wait", address, "--timeout", "60").returncode == 0
    assert "from here" in cli("result", address).stdout
    by_path = spawn(host, str(recipe))  # RECIPE as a path: still this machine's file
    assert cli("wait", by_path, "--timeout", "60").returncode == 0
    assert "hello" in cli("result", by_path).stdout
    kept = list((host.state / "sessions").glob("via-*/recipes/*/greet.json"))
    assert kept and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in kept)


def test_a_bad_recipe_file_is_one_line_and_nothing_reaches_the_host(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """Read and checked here first: bad JSON, a huge file, a FIFO, a missing file, a
    recipe that imports others, one that is no recipe: one line, exit 2, no placement,
    no run there (nothing was sent)."""
    host = ssh_hosts[0]
    add(host)
    bad = {
        "notjson.json": "{not json",
        "list.json": "[1, 2]",
        "imports.json": json.dumps({"imports": ["other"], "template": "true"}),
        "schema.json": json.dumps({"template": 5}),
        "unknown.json": json.dumps({"nosuchkey": "x", "template": "true"}),
        "deep.json": "[" * 100_000,
        "huge.json": json.dumps({"template": "true", "pad": "x" * (2 << 20)}),
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    os.mkfifo(tmp_path / "fifo.json")
    runs_there = host.state / "runs"
    before = sorted(p.name for p in runs_there.iterdir()) if runs_there.is_dir() else []
    for name in [*bad, "fifo.json", "missing.json"]:
        done = cli(
            "spawn", "--host", host.name, "--recipe", str(tmp_path / name), "--session", "coord"
        )
        assert done.returncode == 2, (name, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    placed = ssh_home.host(host.name).placements
    assert not placed.exists() or not any(placed.iterdir())
    after = sorted(p.name for p in runs_there.iterdir()) if runs_there.is_dir() else []
    assert after == before


def test_spawn_host_values_that_read_like_options_stay_values(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """The remote request is built from the options click parsed, never from the raw
    words: a template that reads `--json`, a value that reads `--session intruder`, a
    secret's name that reads like an option are each the one value they were given."""
    host = ssh_hosts[0]
    add(host)
    done = cli(
        "spawn", "--host", host.name, "--session", "coord", "--as", "run:optlike",
        "-t", "--json", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["address"] == f"run:{host.name}/optlike"
    record = json.loads((host.state / "runs" / "optlike" / "run.json").read_text())
    assert "--json" in json.dumps(record.get("recipe") or record)
    address = spawn(host, "-t", "printf %s {v}", "-v", "v=x --session intruder --host=beta")
    assert cli("wait", address, "--timeout", "60").returncode == 0
    assert 'result   "x --session intruder --host=beta"\n' in cli("result", address).stdout
    waited = cli("spawn", "--host", host.name, "-t", "true", "--wait", "--session", "coord")
    assert waited.returncode == 2 and waited.stderr.count("\n") == 1
    dup = cli("spawn", "--host", host.name, "-t", "echo {a}", "-v", "a=1", "-v", "a=2")
    assert dup.returncode == 2 and "given twice" in dup.stderr


def _idle_run(host: SshHost, tag: str) -> tuple[str, Path]:
    """A run there whose mailbox takes job.item and that reads none of it (they stay in
    its inbox, in arrival order); its address and its inbox on the host."""
    ready = make_fifo(host.base / f"ready-{tag}")
    recipe = {
        "mailbox": {"accepts": ["job.item"]},
        "template": "sh -c 'echo ready > \"$1\"; exec sleep 300' x {f}",
    }
    (host.home / "config" / "actors" / "recipes" / "idle.json").write_text(json.dumps(recipe))
    address = spawn(host, "idle", "-v", f"f={ready}")
    assert read_fifo_line(ready) == "ready"
    return address, host.state / "runs" / address.split("/")[1] / "inbox.jsonl"


def _items(inbox: Path) -> list[int]:
    """The `n` of every job.item entry in a run's inbox journal, in its order."""
    found = []
    if inbox.exists():
        for line in inbox.read_text().splitlines():
            record = json.loads(line)
            envelope = record.get("envelope") or {}
            if envelope.get("type") == "job.item":
                found.append(envelope["body"]["n"])
    return found


def message(address: str, n: int) -> subprocess.CompletedProcess[str]:
    body = json.dumps({"n": n})
    return cli("message", address, "job.item", body, "--body-json", "--session", "coord")


def test_messages_while_the_link_is_down_queue_here_then_flow_in_order_once(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """The link cut: each message is durable here and the sender told so; nothing reaches
    the host. The link restored: the host's link carries them, in order, each once (no
    other command is run to push them)."""
    from tests.conftest import wait_for_change

    host = ssh_hosts[0]
    add(host)
    address, inbox = _idle_run(host, "queue")
    assert message(address, 1).returncode == 0
    host.link(False)
    try:
        queued = f"queued for {host.name} (unreachable): delivered when the link returns\n"
        sent = message(address, 2)
        assert sent.returncode == 0 and sent.stdout == queued, sent.stderr
        # a type its mailbox does not take: the host's refusal comes back as a follow-up
        odd = cli("message", address, "not.accepted", "x", "--session", "coord")
        assert odd.returncode == 0 and odd.stdout == queued, odd.stderr
        outbox = ssh_home.host(host.name).outbox
        assert stat.S_IMODE(outbox.stat().st_mode) == 0o600
        assert _items(inbox) == [1]
    finally:
        host.link(True)
    wait_for_change(
        inbox.parent, lambda: _items(inbox) == [1, 2], timeout=120, what="the queue flowed"
    )
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    [refused] = followups()
    assert refused["type"] == "message.refused" and refused["from"] == address
    assert "not.accepted" in refused["summary"] and refused["body"]["host"] == host.name
    assert message(address, 3).returncode == 0
    assert _items(inbox) == [1, 2, 3]
    keys = [
        json.loads(line)["envelope"].get("idempotency_key")
        for line in inbox.read_text().splitlines()
        if '"job.item"' in line
    ]
    assert len(set(keys)) == 3 and all(keys)
    assert cli("kill", address, "--session", "coord").returncode == 0


def test_a_send_retried_after_a_lost_answer_delivers_once(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """The sender dies after the host delivered the message, before the answer is written
    here: it is still queued here, the next send carries it again under its key, and the
    host answers it without a second delivery."""
    import signal

    host = ssh_hosts[1]
    add(host)
    address, inbox = _idle_run(host, "retry")
    barrier = make_fifo(tmp_path / "barrier")
    env = {"ACTORS_PAUSE_AT": "hosts.outbox.before_mark", "ACTORS_PAUSE_FIFO": str(barrier)}
    body = json.dumps({"n": 1})
    argv = ["message", address, "job.item", body, "--body-json", "--session", "coord"]
    with subprocess.Popen(
        [sys.executable, "-m", "actors", *argv],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as sender:
        pid, point = read_fifo_line(barrier, timeout=60).split()
        assert point == "hosts.outbox.before_mark" and int(pid) == sender.pid
        os.kill(sender.pid, signal.SIGKILL)
    assert _items(inbox) == [1]  # delivered there, not yet known here
    outbox = ssh_home.host(host.name).outbox
    assert '"state":"delivered"' not in outbox.read_text().replace(": ", ":")
    assert message(address, 2).returncode == 0  # carries the first again, then this one
    assert _items(inbox) == [1, 2]
    states = [json.loads(line) for line in outbox.read_text().splitlines()]
    answers = [s["answer"] for s in states if "answer" in s]
    assert [a.get("repeat", False) for a in answers] == [True, False]
    assert cli("kill", address, "--session", "coord").returncode == 0

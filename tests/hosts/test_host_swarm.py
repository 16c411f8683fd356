"""A swarm whose workers run on hosts (`-v hosts=a,b`: a recipe node's `host`), against
two real sshd hosts (tests/hosts/netns.py), stand-in workers being shell commands."""

from __future__ import annotations

import json
import os
from pathlib import Path

from runtime.hosts.remote import placed_rows
from runtime.messaging.boxes import run_mailbox
from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line, wait_for_change
from tests.hosts.netns import SshHost
from tests.hosts.test_hosts import add, followups, spawn


def swarm(*values: str) -> str:
    return str(started_swarm(*values)["run"])


def started_swarm(*values: str) -> dict:
    args = [a for v in values for a in ("-v", v)]
    done = cli("spawn", "swarm", *args, "--session", "coord", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def placed(home: StateRoot) -> dict[str, dict]:
    """Every run placed on a host from here, by address (`ls --json`)."""
    rows = json.loads(cli("ls", "--json").stdout)
    return {r["run"]: r for r in rows if r.get("host")}


def worker_followups(home: StateRoot, run: str) -> list[dict]:
    """The follow-ups of the swarm's remote workers, as the swarm's inbox holds them."""
    entries = [e["envelope"] for e in run_mailbox(home.run(run)).entries()]
    return [e for e in entries if "/" in str(e.get("from"))]


def test_a_swarm_spreads_its_workers_over_two_hosts(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    for host in ssh_hosts:
        add(host)
    run = swarm(
        "workers=4", "hosts=alpha,beta", "cmd=echo worker $1 pid-ns $(readlink /proc/self/ns/pid)"
    )
    waited = cli("wait", f"run:{run}", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    rows = placed(ssh_home)
    assert sorted(r["host"] for r in rows.values()) == ["alpha", "alpha", "beta", "beta"]
    assert all(r["status"] == "done" and r["owner_id"] == f"run:{run}" for r in rows.values())
    # each worker's end came home into the swarm's inbox over its host's link, once
    got = worker_followups(ssh_home, run)
    assert sorted(e["from"] for e in got) == sorted(rows)
    assert {e["type"] for e in got} == {"run.done"}
    # the workers ran there: their PID namespace is not ours
    ours = str(Path("/proc/self/ns/pid").readlink())
    output = cli("result", f"run:{run}").stdout
    for index in range(4):
        assert f"worker {index} pid-ns" in output
    assert ours not in output
    # the coordinator hears of the swarm once, not of its workers
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "30").returncode == 0
    [envelope] = followups()
    assert envelope["from"] == f"run:{run}" and envelope["type"] == "run.done"


def test_unknown_hosts_are_refused_before_anything_starts(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    add(ssh_hosts[0])
    for hosts in ("alpha,gamma", "../x", "alpha,\x1b[2J"):
        done = cli("spawn", "swarm", "-v", "cmd=true", "-v", f"hosts={hosts}")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "not a host of this machine" in done.stderr
        assert "\x1b" not in done.stderr
    assert not ssh_home.runs.exists() or not any(ssh_home.runs.iterdir())
    assert placed(ssh_home) == {}
    assert not ssh_home.host("alpha").placements.exists()


def test_killing_the_swarm_kills_its_workers_on_their_hosts(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    for host in ssh_hosts:
        add(host)
    ready = [make_fifo(tmp_path / f"ready-{index}") for index in range(2)]
    run = swarm(
        "workers=2", "hosts=alpha,beta", f"cmd=echo up > {tmp_path}/ready-$1; exec sleep 31339"
    )
    assert [read_fifo_line(r) for r in ready] == ["up", "up"]
    for host in ssh_hosts:
        assert any("sleep 31339" in p for p in host.processes())
    other = cli("kill", f"run:{run}", "--session", "someone-else")
    assert other.returncode == 2
    assert all(r["status"] == "placed" for r in placed(ssh_home).values())
    killed = cli("kill", f"run:{run}", "--session", "coord")
    assert killed.returncode == 0, killed.stderr
    for host in ssh_hosts:
        assert not any("sleep 31339" in p for p in host.processes())
    assert {r["status"] for r in placed(ssh_home).values()} == {"killed"}


def test_cancelling_the_swarm_stops_its_workers_there(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    host = ssh_hosts[1]
    add(host)
    ready = make_fifo(host.base / "ready-cancel")
    run = swarm("workers=1", "hosts=beta", f"cmd=echo up > {ready}; exec sleep 31340")
    assert read_fifo_line(ready) == "up"
    cancelled = cli("cancel", f"run:{run}", "--session", "coord")
    assert cancelled.returncode == 0, cancelled.stderr
    assert not any("sleep 31340" in p for p in host.processes())
    assert {r["status"] for r in placed(ssh_home).values()} == {"killed"}


def test_a_dropped_link_kills_no_worker(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    run = swarm("workers=1", "hosts=alpha", f"cmd=echo up > {ready}; cat {gate}")
    assert read_fifo_line(ready) == "up"
    host.link(up=False)
    try:
        assert any(f"cat {gate}" in p for p in host.processes())  # goes on there
        assert cli("status", f"run:{run}", "--json").returncode == 0
        with open(gate, "w") as w:
            w.write("released\n")
    finally:
        host.link(up=True)
    waited = cli("wait", f"run:{run}", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    [envelope] = worker_followups(ssh_home, run)
    assert envelope["type"] == "run.done"
    assert "released" in cli("result", f"run:{run}").stdout


def link_pids(home: StateRoot) -> list[int]:
    """This root's `actors host link` processes."""
    marker = f"ACTORS_HOME={home.path}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and b"host\x00link" in (proc / "cmdline").read_bytes()
                and marker in (proc / "environ").read_bytes().split(b"\x00")
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_the_link_a_worker_started_outlives_the_swarm(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """The worker's step starts the host's link inside the swarm's cgroup; the link
    serves every run placed there, so the swarm's end (its cgroup killed) must not end it."""
    from runtime.core.process import wait_gone

    host = ssh_hosts[0]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    started = started_swarm("workers=1", "hosts=alpha", f"cmd=echo up > {ready}; cat {gate}")
    assert read_fifo_line(ready) == "up"
    # the step starts the link just after the run started there; woken by the link's
    # first file (its flock on hosts/alpha/link.lock), re-checked every 200 ms besides
    wait_for_change(ssh_home.hosts, lambda: link_pids(ssh_home), what="the host's link")
    [link] = link_pids(ssh_home)
    mine = spawn(host, "-t", "sleep 31346")  # the user's own run: the same link serves it
    with open(gate, "w") as w:
        w.write("go\n")
    assert cli("wait", f"run:{started['run']}", "--timeout", "120").returncode == 0
    assert wait_gone([int(started["pid"])], timeout=30)  # its end and its sweep are over
    assert link_pids(ssh_home) == [link] and os.path.exists(f"/proc/{link}")
    assert cli("kill", mine, "--session", "coord").returncode == 0


def test_control_kill_of_the_swarm_reaps_its_workers_there(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`control.kill` gives the worker's step no time (SIGKILL): the swarm's end starts
    `actors host reap`, which kills the workers on their hosts."""
    for host in ssh_hosts:
        add(host)
    ready = [make_fifo(tmp_path / f"ready-{index}") for index in range(2)]
    run = swarm(
        "workers=2", "hosts=alpha,beta", f"cmd=echo up > {tmp_path}/ready-$1; exec sleep 31347"
    )
    assert [read_fifo_line(r) for r in ready] == ["up", "up"]
    assert cli("message", f"run:{run}", "control.kill", "--session", "coord").returncode == 0
    assert cli("wait", f"run:{run}", "--timeout", "60").returncode != 0
    # the reap is detached from the swarm's end: its outcome is awaited, woken by each
    # placement record it ends (hosts/<name>/placements/<run>.json, written atomically)
    wait_for_change(
        ssh_home.hosts,
        lambda: {r["status"] for r in placed_rows(ssh_home)} == {"killed"},
        timeout=60,
        what="the reap to end both placements as killed",
    )
    for host in ssh_hosts:
        assert not any("sleep 31347" in p for p in host.processes())


def test_a_workers_words_reach_the_host_exactly(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """Each word of a worker's command is one argument on the host, byte for byte: the
    same command prints the same here and there (no placeholder, JSON, option or shell
    reading of a value on the way)."""
    add(ssh_hosts[0])
    cmd = (
        "printf '<%s>\\n' \"$0\" \"$1\" 007 '[1, 2]' true '{hosts}' '{{x}}' '$(id)' "
        "'a  b' -v --as=run:x -- '--json' 'é\\u2028' \"$(printf 'two\\nlines')\""
    )
    here = swarm("workers=1", f"cmd={cmd}")
    there = swarm("workers=1", "hosts=alpha", f"cmd={cmd}")
    for run in (here, there):
        assert cli("wait", f"run:{run}", "--timeout", "120").returncode == 0
    shown = [cli("result", f"run:{run}").stdout for run in (here, there)]
    said = [out[out.index("<") :] for out in shown]  # after the line naming the run
    assert "<007>" in said[0] and "<[1, 2]>" in said[0] and "<{hosts}>" in said[0]
    assert said[0] == said[1]


def test_a_step_outside_a_run_is_refused_in_one_line(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    add(ssh_hosts[0])
    done = cli("host", "step", "alpha")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "from inside that run" in done.stderr
    assert placed(ssh_home) == {}

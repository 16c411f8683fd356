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
from tests.conftest import cli, make_fifo, read_fifo_line
from tests.hosts.netns import SshHost
from tests.hosts.test_host_swarm import swarm
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

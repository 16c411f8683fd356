"""A run on another host against the same run here, in the same process, as ratios:

- `spawn --host` (the CLI's wall time, the host's ssh master already up) against a local
  `spawn`;
- `message` to a running remote run (through the host's outbox: queued here, sent,
  answered) against a message to a local run;
- run end -> follow-up durable in the coordinator's session inbox: for a remote run the
  host's `result.json` `ended_at` to the local inbox entry's `queued_at` (the hosts share
  this machine's clock), across the host's link; for a local run the same two stamps.

- a swarm over three hosts against the same swarm on one host (`swarm` recipe, `-v
  hosts=...`): its wall time from `spawn` to the end of `wait`. Its six stand-in agents
  sleep, 3 s (1 s with --quick): this machine has 2 cores, which three namespace hosts
  share, so CPU work could not run faster spread over them; sleep can. Each host runs
  one agent at a time (the agent takes a per-host flock, standing in for a machine's
  capacity), so one host runs the six agents one after another and three hosts two
  each. A second pair without the flock (every agent at once wherever it is) shows what
  spreading costs when no host is full.

The hosts are tests/hosts/netns.py's: a network namespace with its own PID and mount
namespaces and its own sshd each, on this machine (so the figures are the cost of ssh,
the remote actors and the link, not of a real network). It needs root and
openssh-server, and says so and skips otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._stats import emit, row


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "actors", *args], capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"actors {' '.join(args)}: {done.stderr.strip()}")
    return done


def _followup_ms(root: Path, session: str, result: Path, address: str) -> float:
    """result.json's ended_at -> the session inbox entry's queued_at, waited for."""
    from runtime.core.ids import parse_iso

    inbox = root / "sessions" / session / "inbox.jsonl"
    while True:
        for line in inbox.read_text().splitlines() if inbox.exists() else []:
            entry = json.loads(line)
            if entry.get("envelope", {}).get("from") == address:
                ended = json.loads(result.read_text())["ended_at"]
                return (parse_iso(entry["queued_at"]) - parse_iso(ended)) * 1000
        _cli("inbox", "wait", "--session", session, "--timeout", "60")
        _cli("inbox", "read", "--session", session, "--json")


def _result(host: Any, started: dict[str, Any]) -> Path:
    return Path(host.state) / "runs" / started["run"] / "result.json"


def main(quick: bool) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.hosts.netns import start_host, stop_host, unavailable

    why = unavailable()
    if why:
        emit(f"hosts: skipped ({why})")
        return
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        key = base / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        actors_bin = Path(sys.executable).parent / "actors"
        hosts = []
        try:
            for index, name in enumerate(("alpha", "beta", "gamma")):
                hosts.append(start_host(name, base / name, key, actors_bin, index))
        except BaseException:
            for started in hosts:
                stop_host(started)
            raise
        host = hosts[0]
        known = base / "known_hosts"
        known.write_text("".join((h.base / "known_hosts").read_text() for h in hosts))
        root = base / "state"
        config = base / "ssh_config"
        config.write_text(
            f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n"
        )
        os.environ.update(ACTORS_HOME=str(root), ACTORS_SSH_CONFIG=str(config))
        try:
            for each in hosts:
                _cli("host", "add", each.name, each.url)
            spawn_local, spawn_remote, follow_local, follow_remote, follow_warm = [], [], [], [], []
            n = 5 if quick else 20
            for _ in range(n):
                started = time.perf_counter()
                here = json.loads(_cli("spawn", "-t", "true", "--session", "b", "--json").stdout)
                spawn_local.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                there = json.loads(
                    _cli(
                        "spawn", "--host", "alpha", "-t", "true", "--session", "b", "--json"
                    ).stdout
                )
                spawn_remote.append((time.perf_counter() - started) * 1000)
                follow_local.append(
                    _followup_ms(
                        root, "b", root / "runs" / here["run"] / "result.json", here["address"]
                    )
                )
                follow_remote.append(
                    _followup_ms(root, "b", _result(host, there), there["address"])
                )
            # the link up already (another run out there keeps it): only the relay's cost
            keeper = json.loads(
                _cli(
                    "spawn", "--host", "alpha", "-t", "sleep 3600", "--session", "b", "--json"
                ).stdout
            )
            for _ in range(n):
                there = json.loads(
                    _cli(
                        "spawn", "--host", "alpha", "-t", "true", "--session", "b", "--json"
                    ).stdout
                )
                follow_warm.append(_followup_ms(root, "b", _result(host, there), there["address"]))
            # a message to a running run: local, and to the remote one over the outbox
            # (queued here, sent, the host's answer written back)
            local_keeper = json.loads(
                _cli("spawn", "-t", "sleep 3600", "--session", "b", "--json").stdout
            )
            message_local, message_remote = [], []
            for index in range(n):
                for address, into in (
                    (local_keeper["address"], message_local),
                    (keeper["address"], message_remote),
                ):
                    started = time.perf_counter()
                    _cli("message", address, "bench.item", str(index), "--force", "--session", "b")
                    into.append((time.perf_counter() - started) * 1000)
            _cli("kill", local_keeper["address"], "--session", "b")
            _cli("kill", keeper["address"], "--session", "b")
            emit(row("spawn -t true (local)", spawn_local))
            emit(row("spawn --host -t true (ssh host)", spawn_remote, spawn_local))
            emit(row("run end -> follow-up in inbox (local)", follow_local))
            emit(row("  (ssh host, the link started for it)", follow_remote, follow_local))
            emit(row("  (ssh host, the link already up)", follow_warm, follow_local))
            emit(row("message (local run)", message_local))
            emit(row("message run:<host>/<id> (ssh host, outbox)", message_remote, message_local))
            _swarm_rows(1, 1.0) if quick else _swarm_rows(3, AGENT_S)
        finally:
            from runtime.store.layout import StateRoot
            from tests.hosts.conftest import stop_links_and_masters

            stop_links_and_masters(StateRoot(root))
            for each in hosts:
                stop_host(each)


SWARM_WORKERS = 6
AGENT_S = 3.0


def _swarm_s(hosts: str, agent: str) -> float:
    """One swarm of SWARM_WORKERS stand-in agents over `hosts`: spawn to its end, in s."""
    started = time.perf_counter()
    run = json.loads(
        _cli(
            "spawn",
            "swarm",
            "-v",
            f"workers={SWARM_WORKERS}",
            "-v",
            f"hosts={hosts}",
            "-v",
            f"cmd={agent}",
            "--session",
            "b",
            "--json",
        ).stdout
    )["run"]
    _cli("wait", f"run:{run}", "--timeout", "300")
    return time.perf_counter() - started


def _swarm_rows(rounds: int, agent_s: float) -> None:
    """The 3-host swarm against the one-host swarm, each agent a sleep (module doc)."""
    one_slot = f'flock "$XDG_STATE_HOME/agent-slot" sleep {agent_s:g}'
    at_once = f"sleep {agent_s:g}"
    for label, agent in (("1 agent at a time per host", one_slot), ("all at once", at_once)):
        one, three = [], []
        for _ in range(rounds):
            one.append(_swarm_s("alpha", agent))
            three.append(_swarm_s("alpha,beta,gamma", agent))
        name = f"swarm {SWARM_WORKERS}x sleep {agent_s:g}s, {label}"
        emit(row(f"{name} (1 host)", one, unit="s"))
        emit(row("  (3 hosts)", three, one, unit="s"))


if __name__ == "__main__":
    main("--quick" in sys.argv)

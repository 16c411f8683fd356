"""Two real SSH hosts for the whole test session (tests/hosts/netns.py), and per test a
state root whose ssh configuration reaches them with this session's key only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.hosts.netns import SshHost, start_host, stop_host, unavailable

ACTORS_BIN = Path(sys.executable).parent / "actors"


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[SshHost]]:
    why = unavailable()
    if why:
        pytest.skip(f"no SSH test hosts: {why}")
    base = tmp_path_factory.mktemp("hosts")
    key = base / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    hosts: list[SshHost] = []
    try:
        for index, name in enumerate(("alpha", "beta")):
            hosts.append(start_host(name, base / name, key, ACTORS_BIN, index))
        yield hosts
    finally:
        for host in hosts:
            stop_host(host)


@pytest.fixture
def ssh_home(
    home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StateRoot]:
    """`home` plus ACTORS_SSH_CONFIG: an ssh config with this session's key and the hosts'
    keys in its known_hosts (checked strictly)."""
    key = ssh_hosts[0].base.parent / "id_ed25519"
    known = tmp_path / "known_hosts"
    known.write_text("".join((h.base / "known_hosts").read_text() for h in ssh_hosts))
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n"
    )
    monkeypatch.setenv("ACTORS_SSH_CONFIG", str(config))
    yield home
    stop_links_and_masters(home)


def stop_links_and_masters(home: StateRoot) -> None:
    """After a test: its hosts' links (found by their state root) and ssh masters go."""
    import contextlib
    import os
    import signal

    marker = f"ACTORS_HOME={home.path}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if b"host\x00link" in (proc / "cmdline").read_bytes() and marker in (
                proc / "environ"
            ).read_bytes().split(b"\x00"):
                os.kill(int(proc.name), signal.SIGKILL)
    if home.hosts.is_dir():
        for host in home.hosts.iterdir():
            socket = host / "ssh.sock"
            if socket.exists():
                subprocess.run(
                    ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "x"],
                    capture_output=True,
                    timeout=10,
                    check=False,
                )


def reset_host_state(host: SshHost) -> None:
    """A host's state root emptied (between tests that count its runs)."""
    shutil.rmtree(host.state, ignore_errors=True)

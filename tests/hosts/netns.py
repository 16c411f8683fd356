"""Test hosts: each one a network namespace (`ip netns`) with its own PID and mount
namespaces and its own OpenSSH server, reached from the test's namespace over one veth
pair on a private /30. Nothing listens beyond those namespaces.

Each host's sshd gives its sessions XDG_STATE_HOME and XDG_DATA_HOME of its own (so the
remote `actors` has its own state root and install place), and inside the host's mount
namespace `/usr/local/bin` (where `actors` is found on the remote's PATH) is a directory of
this test session: a remote process is invisible in our /proc, and its files are the
host's own.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


def unavailable() -> str | None:
    """Why test hosts cannot be made here (None when they can)."""
    if not SSHD.exists():
        return "OpenSSH's server is not installed (make system-deps installs openssh-server)"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if not shutil.which("ip") or not shutil.which("unshare") or not shutil.which("ssh-keygen"):
        return "iproute2, util-linux's unshare and OpenSSH's client are needed"
    probe = f"actp{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


@dataclass
class SshHost:
    name: str
    netns: str
    address: str
    outer_link: str
    base: Path
    sshd: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        """The host's XDG directories."""
        return self.base / "xdg"

    @property
    def state(self) -> Path:
        return self.home / "state" / "actors"

    @property
    def url(self) -> str:
        return f"ssh://root@{self.address}"

    def link(self, up: bool) -> None:
        """Cut (or restore) the host's only link: `ip link set ... down`."""
        _run("ip", "link", "set", self.outer_link, "up" if up else "down")

    def ns_run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command inside the host's network, PID and mount namespaces."""
        pid = self.sshd.pid if self.sshd else 0
        return subprocess.run(
            ["nsenter", "-t", str(_child(pid)), "-n", "-p", "-m", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def processes(self) -> list[str]:
        """Every process's command line in the host's PID namespace.

        Full width (a COLUMNS in the environment must not cut a path off), and
        listed again while a live process shows no command line: inside a PID
        namespace there are no kernel threads, so a bracketed name is a process
        caught between the two halves of an execve, whose new arguments are not
        set up yet. That window is microseconds; the bound only stops a bug
        from hanging the test.
        """
        deadline = time.monotonic() + 10
        while True:
            out = self.ns_run("ps", "-ww", "-eo", "stat=,args=").stdout
            rows = [line.strip().split(None, 1) for line in out.splitlines() if line.strip()]
            mid_exec = [r for r in rows if len(r) == 2 and not r[0].startswith("Z") and r[1].startswith("[")]
            if not mid_exec or time.monotonic() > deadline:
                return [r[1] for r in rows if len(r) == 2]


def _child(pid: int) -> int:
    """The first process in the new PID namespace: unshare's forked child (sshd)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if kids:
                return int(kids[0])
        time.sleep(0.02)
    raise RuntimeError(f"unshare {pid} started no child")


def start_host(name: str, base: Path, key: Path, actors_bin: Path, index: int) -> SshHost:
    """One host: netns + veth + sshd in new PID and mount namespaces."""
    tag = f"{os.getpid() % 100000}{index}"
    netns, outer, inner = f"act{tag}", f"va{tag}", f"vb{tag}"
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    third = random.choice([n for n in range(1, 251) if f"10.231.{n}." not in used])
    address, gateway = f"10.231.{third}.{4 * index + 2}", f"10.231.{third}.{4 * index + 1}"
    host = SshHost(name, netns, address, outer, base)
    for sub in ("root/.ssh", "bin", "etc", "xdg/state", "xdg/data", "xdg/config/actors/recipes"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    (base / "root").chmod(0o700)
    (base / "root/.ssh").chmod(0o700)
    shutil.copy(f"{key}.pub", base / "root/.ssh/authorized_keys")
    (base / "bin/actors").symlink_to(actors_bin)
    hostkey = base / "etc/ssh_host_ed25519_key"
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey))
    config = base / "etc/sshd_config"
    config.write_text(
        f"ListenAddress {address}\nPort 22\nHostKey {hostkey}\n"
        f"PidFile {base}/etc/sshd.pid\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"AuthorizedKeysFile {base}/root/.ssh/authorized_keys\nStrictModes no\n"
        "X11Forwarding no\nAllowTcpForwarding no\nPrintMotd no\n"
        f"SetEnv XDG_STATE_HOME={base}/xdg/state XDG_DATA_HOME={base}/xdg/data "
        f"XDG_CONFIG_HOME={base}/xdg/config\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    _run("ip", "netns", "add", netns)
    _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
    _run("ip", "link", "set", inner, "netns", netns)
    _run("ip", "addr", "add", f"{gateway}/30", "dev", outer)
    _run("ip", "link", "set", outer, "up")
    _run("ip", "-n", netns, "addr", "add", f"{address}/30", "dev", inner)
    _run("ip", "-n", netns, "link", "set", inner, "up")
    _run("ip", "-n", netns, "link", "set", "lo", "up")
    boot(host)
    (base / "known_hosts").write_text(
        f"{address} {(base / 'etc/ssh_host_ed25519_key.pub').read_text().split(' ')[0]} "
        f"{(base / 'etc/ssh_host_ed25519_key.pub').read_text().split(' ')[1]}\n"
    )
    return host


def boot(host: SshHost) -> None:
    """The host's sshd as the first process of fresh PID and mount namespaces (inside the
    host's network namespace): its "boot"."""
    base, netns, config = host.base, host.netns, host.base / "etc/sshd_config"
    (base / "etc/empty").write_text("")
    # a clean login: this machine's own shell start-up files (a pyenv init costs ~0.1 s
    # per channel) are not the host's
    mounts = [
        f"mount --bind {base}/etc/empty {rc}"
        for rc in ("/root/.bashrc", "/root/.profile", "/root/.bash_profile")
        if Path(rc).exists()
    ]
    mounts.append(f"mount --bind {base}/bin /usr/local/bin")
    # the host's first process is a `sleep` (its "init"), so sshd can be restarted alone
    script = " && ".join([*mounts, f"{SSHD} -f {config}", "exec sleep infinity"])
    with open(base / "sshd.log", "ab") as log:
        host.sshd = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                netns,
                "unshare",
                "--pid",
                "--mount",
                "--fork",
                "--mount-proc",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    _wait_port(host)


def restart_sshd(host: SshHost) -> None:
    """Every sshd process of the host killed (the listener and each connection's), then a
    fresh listener: what a restarted sshd does to open connections, the host's other
    processes untouched."""
    listed = host.ns_run("ps", "-eo", "pid=,comm=").stdout.splitlines()
    sshds = [line.split()[0] for line in listed if line.split()[1:] == ["sshd"]]
    assert sshds and host.ns_run("kill", "-KILL", *sshds).returncode == 0
    started = host.ns_run(str(SSHD), "-f", str(host.base / "etc/sshd_config"))
    assert started.returncode == 0, started.stderr
    _wait_port(host)


def reboot(host: SshHost) -> None:
    """Every process of the host gone at once (its PID namespace's init killed), its
    files kept, then booted again."""
    assert host.sshd is not None
    os.kill(_child(host.sshd.pid), signal.SIGKILL)
    host.sshd.wait(timeout=10)
    boot(host)


def _wait_port(host: SshHost) -> None:
    """sshd listens once its socket shows in the namespace's table (ss), within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["ip", "netns", "exec", host.netns, "ss", "-Hltn", "sport = :22"],
            capture_output=True,
            text=True,
        ).stdout
        if host.address in out:
            return
        if host.sshd and host.sshd.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(
        f"sshd of {host.name} did not listen: {(host.base / 'sshd.log').read_text()}"
    )


def stop_host(host: SshHost) -> None:
    """Everything of the host goes: its PID namespace (killing unshare's child kills
    every process in it), its veth and its netns."""
    if host.sshd is not None:
        with contextlib.suppress(Exception):
            os.kill(_child(host.sshd.pid), signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(host.sshd.pid, signal.SIGKILL)
        host.sshd.wait(timeout=10)
    subprocess.run(["ip", "link", "del", host.outer_link], capture_output=True)
    subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)

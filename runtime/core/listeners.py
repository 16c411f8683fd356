"""Who is at the other end of a local socket (a TCP port, a Unix socket), from the kernel.

Loopback is shared by every local user: a port on 127.0.0.1 that our OpenCode listened
on yesterday may be held by someone else's process today. So a credential goes to a
local port only when the kernel says the socket there is ours:
- `proven_listener(host, port, pids)`: the port's listening socket is held by one of
  `pids` (the caller's own ancestors), which is how `actors mcp` proves that the URL the
  OpenCode plugin names is the OpenCode that started it;
- `foreign_peer(sock)`: whether the far end of a connected socket (TCP: its row in
  /proc/net/tcp; Unix: SO_PEERCRED) is another user's process, which the adapters check
  once connected and before the first byte (OpenCode's password, Claude Code's
  messaging token, a follow-up to Codex or pi), so a port or socket path taken over after
  the program we meant exited cannot receive it.

Linux only: the tables are /proc/net/tcp and /proc/net/tcp6 (this network namespace)
and /proc/<pid>/fd. Where they cannot be read the answers are "unknown" (None), and
`actors mcp` then proves no URL (it registers a `file` session: nothing is sent).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import NamedTuple

LISTEN = 0x0A
_READS = 3
"""Reads of the tables before a connection's far end counts as not shown: the kernel
lists them in chunks, and a socket moving from the handshake table to the established one
while they are read can be missed once."""
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


class TcpSocket(NamedTuple):
    """One row of /proc/net/tcp{,6}."""

    local: tuple[str, int]
    remote: tuple[str, int]
    state: int
    uid: int
    inode: int


def _address(field: str) -> tuple[str, int]:
    """`0100007F:1F90` -> ("127.0.0.1", 8080): each 32-bit word is in host byte order
    (little-endian here); an IPv4-mapped IPv6 address reads as the IPv4 one."""
    hexaddr, hexport = field.split(":")
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(hexport, 16)


def tcp_sockets() -> list[TcpSocket] | None:
    """Every TCP socket of this network namespace; None when the tables cannot be read."""
    rows: list[TcpSocket] = []
    readable = False
    for table in _TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            parts = line.split()
            if len(parts) < 10:
                continue
            try:
                rows.append(
                    TcpSocket(
                        _address(parts[1]),
                        _address(parts[2]),
                        int(parts[3], 16),
                        int(parts[7]),
                        int(parts[9]),
                    )
                )
            except ValueError:
                continue
    return rows if readable else None


def _unspecified(ip: str) -> bool:
    return ipaddress.ip_address(ip).is_unspecified


def resolve_local(host: str) -> set[str] | None:
    """The addresses `host` names, when every one of them is a loopback address (the
    only hosts a proof is attempted for); None otherwise."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    found: set[str] = set()
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_loopback:
            return None
        found.add(str(address))
    return found or None


def listeners(host_ips: set[str], port: int) -> list[TcpSocket] | None:
    """The listening sockets a connection to any of `host_ips`:`port` could reach (bound
    to that address or to a wildcard one); None when the tables cannot be read."""
    rows = tcp_sockets()
    if rows is None:
        return None
    return [
        row
        for row in rows
        if row.state == LISTEN
        and row.local[1] == port
        and (row.local[0] in host_ips or _unspecified(row.local[0]))
    ]


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds open (empty when not ours to read)."""
    found: set[int] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            found.add(int(target[8:-1]))
    return found


def proven_listener(host: str, port: int, pids: list[int]) -> bool:
    """Whether every socket listening at `host`:`port` (a loopback host) belongs to this
    user and is held open by one of `pids`: then that URL is theirs, and nobody else can
    take the port while they hold it."""
    ips = resolve_local(host)
    if ips is None:
        return False
    found = listeners(ips, port)
    if not found or any(row.uid != os.getuid() for row in found):
        return False
    wanted = {row.inode for row in found}
    held: set[int] = set()
    for pid in pids:
        held |= socket_inodes(pid) & wanted
    return held == wanted


def foreign_peer(sock: socket.socket) -> int | None:
    """The uid of the far end of connected `sock` when that end is another user's process
    on this machine (-1: a loopback peer the tables do not show, which cannot be
    vouched for); None when it is ours, on another machine, or nothing can tell (no
    /proc/net, no SO_PEERCRED): the callers send nothing to a foreign peer."""
    if sock.family == socket.AF_UNIX:
        uid = _unix_peer_uid(sock)
        return uid if uid is not None and uid != os.getuid() else None
    try:
        peer, mine = sock.getpeername(), sock.getsockname()
    except OSError:
        return -1
    want_local, want_remote = (_normal(peer[0]), int(peer[1])), (_normal(mine[0]), int(mine[1]))
    for _ in range(_READS):
        rows = tcp_sockets()
        if rows is None:
            return None
        for row in rows:
            if row.local == want_local and row.remote == want_remote and row.state != LISTEN:
                return row.uid if row.uid != os.getuid() else None
    return -1 if ipaddress.ip_address(want_local[0]).is_loopback else None


def _normal(ip: str) -> str:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def _unix_peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED,
    set by the kernel when the peer called listen); None where the platform has no such
    option."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    return int(uid)

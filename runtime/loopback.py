"""Who is on the other end of a local connection: the uid that owns the peer's socket (loopback TCP), or the pid and
uid the kernel recorded for a Unix socket's peer (`SO_PEERCRED`, `unix_peer_credentials`).

A loopback port is open to every local user, and a secret in a URL stops only those who do not know it; a secret
can leak (a command line, a log, a core dump). A Unix socket would tell its server the peer's uid (`SO_PEERCRED`),
a TCP socket does not; but on Linux the kernel knows the uid that created every socket of the network namespace,
and tells any local user. The peer of a connection we accepted is the socket whose local address is our peer's
and whose remote address is ours: its uid is who is calling. A server that serves only its own user refuses every
other uid, and refuses when the answer is unknown (no such socket, another OS): an unknown caller is not the user.

Two ways to ask, same answer: `sock_diag` netlink looks the one socket up by its address pair (about 0.1 ms);
`/proc/net/tcp` and `/proc/net/tcp6` list every socket, and the kernel walks its whole connection table to write
them (20 ms on a machine with a 262,144-bucket table: too slow to run on the event loop for every request a page
can make). The table is read only where netlink is not available (a sandbox that forbids it).
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))

Address = tuple[str, int]

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
ANY_STATE = 0xFFFFFFFF
NO_COOKIE = 0xFFFFFFFF
DIAG_TIMEOUT = 1.0
"""Bound on the kernel's answer (it answers at once)."""


def _decode(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    """`0100007F:1F90` → (127.0.0.1, 8080). The kernel prints each 32-bit word of the address as the host-order
    number it reads from memory, so the bytes are the words packed back in host order. An IPv4-mapped IPv6
    address (a dual-stack socket talking to 127.0.0.1) is its IPv4 address."""
    host, _, port = field.partition(":")
    try:
        words = [int(host[i : i + 8], 16) for i in range(0, len(host), 8)]
        address = ipaddress.ip_address(b"".join(struct.pack("=I", word) for word in words))
        number = int(port, 16)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address, number


def _normal(address: Address) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    try:
        ip = ipaddress.ip_address(address[0].split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(address[1])


def peer_uid(peer: Address, local: Address, tables: tuple[Path, ...] | None = None) -> int | None:
    """The uid owning the socket at `peer` that is connected to our socket at `local`; None if it cannot be known.

    `peer` and `local` are what `getpeername()` and `getsockname()` of the accepted socket return. Only a loopback
    peer can be found (a remote peer's socket is on another machine): anything else is None. `tables` reads those
    `/proc` tables instead of asking netlink."""
    wanted_local, wanted_remote = _normal(peer), _normal(local)
    if wanted_local is None or wanted_remote is None or not wanted_local[0].is_loopback:
        return None
    if tables is None:
        try:
            return _diag_uid(wanted_local, wanted_remote)
        except OSError:
            tables = TABLES
    return _table_uid(wanted_local, wanted_remote, tables)


def _diag_uid(
    source: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
    destination: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
) -> int | None:
    """Ask `sock_diag` for the one TCP socket `source` → `destination` (an `inet_diag_req_v2` naming its id, no
    dump): its uid, or None if there is none. OSError if netlink cannot be asked."""
    family = socket.AF_INET if source[0].version == 4 else socket.AF_INET6
    sockid = (
        struct.pack(">HH", source[1], destination[1])
        + source[0].packed.ljust(16, b"\0")
        + destination[0].packed.ljust(16, b"\0")
        + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)
    )
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, ANY_STATE) + sockid
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0)
    netlink = getattr(socket, "AF_NETLINK", None)
    if netlink is None:  # not Linux
        raise OSError("no netlink sockets here")
    with socket.socket(netlink, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as channel:
        channel.settimeout(DIAG_TIMEOUT)
        channel.sendto(header + request, (0, 0))
        answer = channel.recv(8192)
    if len(answer) < 16:
        raise OSError("sock_diag: short answer")
    if struct.unpack_from("=H", answer, 4)[0] == NLMSG_ERROR:
        return None  # ENOENT: no such socket
    # inet_diag_msg: family, state, timer, retrans (4 bytes), id (48), expires, rqueue, wqueue, uid, inode
    if len(answer) < 16 + 72:
        raise OSError("sock_diag: short answer")
    uid, inode = struct.unpack_from("=II", answer, 16 + 64)
    # A socket without an inode is no process's any more (TIME_WAIT, which the kernel lists as uid 0; a socket
    # its process closed): unknown.
    return uid if inode else None


def _table_uid(
    source: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
    destination: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int],
    tables: tuple[Path, ...],
) -> int | None:
    """The uid column of the line for `source` → `destination` in `/proc/net/tcp{,6}`-format `tables`."""
    ports = (f":{source[1]:04X}", f":{destination[1]:04X}")
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[9] == "0" or not fields[1].endswith(ports[0]):  # inode 0: see _diag_uid
                continue
            if not fields[2].endswith(ports[1]):
                continue
            if _decode(fields[1]) == source and _decode(fields[2]) == destination:
                try:
                    return int(fields[7])
                except ValueError:
                    return None
    return None


def unix_peer_credentials(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process on the other end of a Unix socket, as the kernel recorded them when it connected
    (Linux `SO_PEERCRED`); None if unknown."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


def unix_peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process on the other end of a Unix socket, None if unknown."""
    credentials = unix_peer_credentials(sock)
    return credentials[1] if credentials is not None else None

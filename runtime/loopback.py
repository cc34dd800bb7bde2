"""Who is on the other end of a loopback TCP connection: the uid that owns the peer's socket.

A loopback port is open to every local user, and a secret in a URL stops only those who do not know it; a secret
can leak (a command line, a log, a core dump). A Unix socket would tell its server the peer's uid (`SO_PEERCRED`),
a TCP socket does not; but on Linux the kernel lists every TCP socket of the network namespace in `/proc/net/tcp`
and `/proc/net/tcp6` with its local and remote address and the uid that created it, to every local user. The peer
of a connection we accepted is the socket whose local address is our peer's and whose remote address is ours: its
uid is who is calling. A server that serves only its own user refuses every other uid, and refuses when the answer
is unknown (no such entry, no `/proc`, another OS): an unknown caller is not the user.
"""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TIME_WAIT = "06"
"""A socket in TIME_WAIT is no longer a socket of its process: the kernel lists it with uid 0 and inode 0."""

Address = tuple[str, int]


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


def peer_uid(peer: Address, local: Address, tables: tuple[Path, ...] = TABLES) -> int | None:
    """The uid owning the socket at `peer` that is connected to our socket at `local`; None if it cannot be known.

    `peer` and `local` are what `getpeername()` and `getsockname()` of the accepted socket return. Only a loopback
    peer can be found (a remote peer's socket is on another machine): anything else is None."""
    wanted_local, wanted_remote = _normal(peer), _normal(local)
    if wanted_local is None or wanted_remote is None or not wanted_local[0].is_loopback:
        return None
    ports = (f":{wanted_local[1]:04X}", f":{wanted_remote[1]:04X}")
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] == TIME_WAIT or not fields[1].endswith(ports[0]):
                continue
            if not fields[2].endswith(ports[1]):
                continue
            if _decode(fields[1]) == wanted_local and _decode(fields[2]) == wanted_remote:
                try:
                    return int(fields[7])
                except ValueError:
                    return None
    return None

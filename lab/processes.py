"""Process audit from /proc: which processes are alive, by process group. Used to prove clean-up, and later
that no unexpected helper (an extension host, an update checker) runs beside the system under test.

Zombies are not alive: on machines whose init does not reap orphans, Chromium's exited helpers stay as zombies
that consume nothing but a pid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    pgid: int
    state: str
    name: str
    ppid: int = 0


def processes() -> list[Proc]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        found.append(Proc(int(entry.name), int(fields[2]), fields[0], name, int(fields[1])))
    return found


def command_line(pid: int) -> str:
    """The process's command line, space-joined ("" once it has exited)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def children_running(parent: int, needle: str) -> list[Proc]:
    """Live (non-zombie) direct children of `parent` whose command line contains `needle`.

    Direct children of one process, not a system-wide `pgrep`: other test runs on the same machine start the same
    servers, and only ours say anything about the system under test."""
    return [p for p in processes() if p.ppid == parent and p.state not in ("Z", "X") and needle in command_line(p.pid)]


def alive_in_group(pgid: int) -> list[Proc]:
    """Processes of group `pgid` that are not zombies."""
    return [p for p in processes() if p.pgid == pgid and p.state not in ("Z", "X")]


def open_fds(pid: int) -> int:
    """How many file descriptors the process has open (sockets, pipes, files)."""
    try:
        return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return 0


def listening_ports(pid: int) -> set[int]:
    """The TCP ports the process listens on (IPv4 and IPv6), from its socket inodes and /proc/net/tcp*."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                link = str(fd.readlink())
            except OSError:
                continue  # closed while we looked
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A: TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports

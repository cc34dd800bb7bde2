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
    return [
        p for p in processes() if p.ppid == parent and p.state not in ("Z", "X") and needle in command_line(p.pid)
    ]


def alive_in_group(pgid: int) -> list[Proc]:
    """Processes of group `pgid` that are not zombies."""
    return [p for p in processes() if p.pgid == pgid and p.state not in ("Z", "X")]

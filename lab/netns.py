"""A second host on this machine: a network namespace with its own address on a veth pair, for a remote browser.

`RemoteHost.create()` makes namespace `cul-remote-<pid>-<n>` and a veth pair: the lab's end `10.203.N.1/24`, the
namespace's end `10.203.N.2/24`, its loopback up. Nothing else connects the two: a process in the namespace reaches
the lab only at 10.203.N.1, and the lab reaches it only at 10.203.N.2. `start()` runs a process in it (`ip netns
exec`, its own process group) and waits, bounded, for the line that says it is ready. `close()` ends every process it
started, then deletes the veth pair and the namespace; a namespace left by a process that died without closing
(its pid gone) is removed, with its processes, by the next `create()`.

Needs root and iproute2's `ip`; `unavailable()` says why not, for a test to skip with.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "cul-remote-"
LOCK = Path(tempfile.gettempdir()) / "cul-netns.lock"
READY_TIMEOUT = 30.0
IP_TIMEOUT = 10.0
SUBNETS = range(1, 255)


class NamespaceUnavailable(RuntimeError):
    """This machine cannot make a network namespace here (not root, no `ip`, or `ip` refused)."""


def unavailable() -> str | None:
    """Why no namespace can be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add); run the lab as root"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) on this machine"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(("ip", *args), capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()[:300]}")
    return done


@contextlib.contextmanager
def _allocating() -> Iterator[None]:
    """Held while a subnet is chosen and taken: two lab processes (xdist workers) never pick the same one."""
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _remove(name: str, host_if: str | None = None) -> None:
    """End every process in namespace `name`, then delete it (and the veth pair, whose lab end is `host_if`)."""
    pids = _ip("netns", "pids", name, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    if host_if is not None:
        _ip("link", "del", host_if, check=False)
    _ip("netns", "del", name, check=False)


def remove_stale() -> list[str]:
    """Remove the namespaces of lab processes that are gone (a run killed before it could close); their names."""
    stale = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        found = re.match(rf"{PREFIX}(\d+)-\d+", line)
        if found and not os.path.exists(f"/proc/{found.group(1)}"):
            _remove(found.group(0))
            stale.append(found.group(0))
    return stale


@dataclass
class RemoteHost:
    """A network namespace reachable from the lab at `address`; the lab is `lab_address` from inside it."""

    name: str
    host_if: str
    address: str
    lab_address: str
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)
    _drains: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def create(cls) -> RemoteHost:
        """A fresh namespace on the first free 10.203.N.0/24; NamespaceUnavailable if none can be made."""
        reason = unavailable()
        if reason is not None:
            raise NamespaceUnavailable(reason)
        with _allocating():
            remove_stale()
            taken = _ip("-4", "addr", "show", check=False).stdout
            subnet = next((n for n in SUBNETS if f"10.203.{n}." not in taken), None)
            if subnet is None:
                raise NamespaceUnavailable("every 10.203.N.0/24 is in use on this machine")
            name, host_if, far_if = f"{PREFIX}{os.getpid()}-{subnet}", f"cul{subnet}h", f"cul{subnet}b"
            host = cls(name, host_if, f"10.203.{subnet}.2", f"10.203.{subnet}.1")
            added = _ip("netns", "add", name, check=False)
            if added.returncode != 0:
                raise NamespaceUnavailable(f"ip netns add: {added.stderr.strip()[:300]}")
            try:
                _ip("link", "add", host_if, "type", "veth", "peer", "name", far_if)
                _ip("link", "set", far_if, "netns", name)
                _ip("addr", "add", f"{host.lab_address}/24", "dev", host_if)
                _ip("link", "set", host_if, "up")
                for args in (
                    ("addr", "add", f"{host.address}/24", "dev", far_if),
                    ("link", "set", far_if, "up"),
                    ("link", "set", "lo", "up"),
                ):
                    _ip("-n", name, *args)
            except BaseException:
                _remove(name, host_if)
                raise
        return host

    def inside(self, *command: str) -> tuple[str, ...]:
        """`command` run in the namespace."""
        return ("ip", "netns", "exec", self.name, *command)

    async def start(self, *command: str, ready: str, env: dict[str, str] | None = None) -> str:
        """Run `command` in the namespace until `close()`; the first stdout line starting with `ready` (bounded)."""
        process = await asyncio.create_subprocess_exec(
            *self.inside(*command),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.processes.append(process)
        said: list[str] = []

        async def ready_line() -> str:
            assert process.stdout is not None
            while line := (await process.stdout.readline()).decode(errors="replace"):
                said.append(line.rstrip())
                if line.startswith(ready):
                    return line.strip()
            raise RuntimeError(f"{command[0]} exited in {self.name} before it was ready: {said[-10:]}")

        try:
            line = await asyncio.wait_for(ready_line(), READY_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(f"{command[0]} was not ready in {self.name} within {READY_TIMEOUT:g}s") from None
        assert process.stdout is not None
        self._drains.append(asyncio.create_task(_drain(process.stdout)))  # a full pipe would stall it
        return line

    async def close(self) -> None:
        """End every process started here (SIGTERM, then SIGKILL), then remove the namespace and the veth pair."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        for drain in self._drains:
            drain.cancel()
        _remove(self.name, self.host_if)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass

"""A TCP port forwarder: `python -m lab.forward PORT TO_HOST` listens on 127.0.0.1:PORT and [::1]:PORT and joins
each connection to TO_HOST:PORT.

Run inside the remote browser's network namespace, it makes the fixture server's two origins
(`http://localhost:PORT`, `http://127.0.0.1:PORT`) lead across the veth pair to the fixture server on the lab's
side, so the scenario pages keep their URLs (and their two origins) while every byte of them crosses the network.
It prints `forwarding` once it listens and stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

READY = "forwarding"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(port: int, to_host: str) -> None:
    async def join(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.wait_for(asyncio.open_connection(to_host, port), 10)
        except (OSError, TimeoutError):
            writer.close()
            return
        await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))

    servers = [await asyncio.start_server(join, "127.0.0.1", port)]
    with contextlib.suppress(OSError):  # no IPv6 in the namespace: localhost is 127.0.0.1 alone
        servers.append(await asyncio.start_server(join, "::1", port))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(READY, flush=True)
    await stop.wait()
    for server in servers:
        server.close()


def main(argv: list[str]) -> int:
    port, to_host = int(argv[0]), argv[1]
    asyncio.run(_serve(port, to_host))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

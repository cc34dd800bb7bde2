"""Serve the scenario pages by hand: `python -m fixtures_sites [--port N]`, Ctrl-C to stop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from fixtures_sites.server import FixtureServer


async def serve(port: int) -> None:
    server = await FixtureServer().start(port)
    print(f"fixture server on {server.prefix}/ and {server.cross_origin}/ (Ctrl-C to stop)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()

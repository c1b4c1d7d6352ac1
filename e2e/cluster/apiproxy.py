"""A plain TCP relay between one real node's kubelet and the API server.

    python3 e2e/cluster/apiproxy.py --listen 127.0.0.1:PORT --to 127.0.0.1:PORT

Every real node reaches the control plane through its own relay, so the node's link to the
control plane can be cut alone, the way a network partition cuts it: ``SIGSTOP`` the relay
and every byte stops in both directions while the connections stay open (no reset, no
error: the kubelet's requests time out), ``SIGCONT`` and the bytes flow again. See
``cut_node_network`` in ``e2e/lib.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def _serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, type=_addr, help="HOST:PORT to accept on")
    p.add_argument("--to", required=True, type=_addr, help="HOST:PORT to relay to")
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.listen, args.to))
    return 0


if __name__ == "__main__":
    sys.exit(main())

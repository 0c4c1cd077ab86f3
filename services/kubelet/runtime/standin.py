"""The stand-in process for an image Skiff has no command for (see `images`).

Serves HTTP 200 on each `--port` (a TCP probe connects, an HTTP probe gets 200 on any path),
runs until SIGTERM or SIGINT and then exits 0, as a well-behaved server would.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
             b"Connection: close\r\n\r\nok\n")


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        async with asyncio.timeout(5):  # not wait_for: see skiff.tasks
            await reader.readuntil(b"\r\n\r\n")
        writer.write(_RESPONSE)
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
            ConnectionError):
        pass
    finally:
        writer.close()


async def main(ports: list[int]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = []
    for port in ports:
        try:
            servers.append(await asyncio.start_server(_serve_one, host="0.0.0.0", port=port))
            print(f"stand-in serving on port {port}", flush=True)
        except OSError as err:
            print(f"stand-in: port {port} not served ({err.strerror}); another process on "
                  "this host holds it", flush=True)
    print("stand-in running; exits on SIGTERM", flush=True)
    await stop.wait()
    for server in servers:
        server.close()
    print("stand-in: SIGTERM received, exiting", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, action="append", default=[])
    asyncio.run(main(parser.parse_args().port))
    sys.exit(0)

"""The gateway of a `skiff up --netns` cluster: its published ports, one process.

The host (CLI, tests, the fence agent) reaches the cluster through one gateway process in
the root namespace: `python -m skiff.cluster.netns.gateway --route FD:NETNS:PORT ...`. The
launcher binds its listening sockets on 127.0.0.1 and hands them over as inherited file
descriptors (no port race); for each accepted connection the gateway opens the upstream
socket *inside* the target's namespace (setns(2) around socket(2); a socket stays in the
namespace it was created in) and connects to 127.0.0.1:<port> there. Published: the
apiserver's gRPC and HTTP ports, etcd's client port and every service's health port. The
upstream leg is the target namespace's loopback, which partitions never cut: the host is
the management network, not a cluster peer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
from dataclasses import dataclass
from typing import Any

from skiff.cluster.netns.commands import GATEWAY_MODULE

CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Route:
    """Connections to the inherited listening socket `fd` go to 127.0.0.1:`port` inside
    the namespace `netns`."""

    fd: int
    netns: str
    port: int


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Gateway:
    """Forwards host connections into namespaces (see the module docstring)."""

    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.ns_fds: dict[str, int] = {}

    def _socket_in(self, netns: str) -> socket.socket:
        if netns not in self.ns_fds:
            self.ns_fds[netns] = os.open(f"/run/netns/{netns}", os.O_RDONLY)
        _setns(self.ns_fds[netns])
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            _setns(self.home)
        sock.setblocking(False)
        return sock

    async def _handle(self, route: Route, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        upstream = self._socket_in(route.netns)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(
                upstream, ("127.0.0.1", route.port)), 5)
            up_reader, up_writer = await asyncio.open_connection(sock=upstream)
        except (OSError, TimeoutError):
            upstream.close()
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def run(self) -> None:
        servers = []
        for route in self.routes:
            sock = socket.socket(fileno=route.fd)
            sock.setblocking(False)

            def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                        route: Route = route) -> Any:
                return self._handle(route, r, w)

            servers.append(await asyncio.start_server(handler, sock=sock))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for server in servers:
            server.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {GATEWAY_MODULE}")
    parser.add_argument("--route", action="append", default=[],
                        help="FD:NETNS:PORT (an inherited listening socket)")
    args = parser.parse_args(argv)
    routes = []
    for spec in args.route:
        fd, netns, port = spec.split(":")
        routes.append(Route(int(fd), netns, int(port)))
    asyncio.run(Gateway(routes).run())


if __name__ == "__main__":
    main()

"""The kubelet's end of pods/portforward (SPEC SB4): one TCP connection to a pod's port.

As a node's runtime does, the kubelet dials `localhost:<port>` from INSIDE the pod's
network namespace (the socket is made on a thread that joined it), so a pod's port is
reached even though nothing outside the pod network routes to the pod's IP. Pods without a
sandbox (`hostNetwork: true`, `--sandbox none`) share the node's network: the kubelet
dials the node's localhost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.client.streaming import SERVICE
from skiff.kubelet.locate import first_located
from skiff.kubelet.sandbox import Sandbox
from skiff.rpc.codec import CodecError, decode_map, decoded_maps, encode
from skiff.rpc.errors import to_grpc

__all__ = ["PortForwardService", "SandboxLocator"]

log = logging.getLogger(__name__)

# (namespace, pod name) → the pod's sandbox, None when it shares the node's network;
# raises ApiError(NOT_FOUND) when the pod is not on this node
SandboxLocator = Callable[[str, str], Sandbox | None]

_CHUNK = 32 * 1024
CONNECT_TIMEOUT = 10.0


class PortForwardService:
    """Register `handler()` with the kubelet's gRPC server; set `locators` when ready."""

    def __init__(self) -> None:
        self.locators: list[SandboxLocator] = []

    def locate(self, namespace: str, name: str) -> Sandbox | None:
        return first_located(self.locators, namespace, name)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "PortForward": grpc.stream_stream_rpc_method_handler(self._forward)})

    async def _connect(self, namespace: str, name: str, port: int) -> socket.socket:
        sandbox = self.locate(namespace, name)
        sock = await asyncio.to_thread(sandbox.socket) if sandbox is not None else socket.socket(
            socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        where = (f"inside the pod's network namespace {sandbox.netns_path}"
                 if sandbox is not None else "on the node (the pod shares its network)")
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):  # not wait_for: see skiff.tasks
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except (OSError, TimeoutError) as err:
            sock.close()
            reason = (os.strerror(err.errno) if isinstance(err, OSError) and err.errno
                      else "timed out")
            raise ApiError(Reason.INTERNAL_ERROR,
                           f"error forwarding port {port} to pod {namespace}/{name}: failed "
                           f"to connect to localhost:{port} {where}: {reason}") from None
        return sock

    async def _forward(self, requests: AsyncIterator[bytes],
                       context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            try:
                first = decode_map(await anext(aiter(requests)))
                port = int(first.get("port") or 0)
            except (CodecError, StopAsyncIteration, ValueError, TypeError):
                raise ApiError.bad_request("portforward: the first message must be the "
                                           "request") from None
            if not 0 < port < 65536:
                raise ApiError.bad_request(f"invalid port: {first.get('port')!r}")
            sock = await self._connect(str(first.get("namespace") or "default"),
                                       str(first.get("name")), port)
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            return
        loop = asyncio.get_running_loop()

        async def pump_input() -> None:
            async for msg in decoded_maps(requests):
                if msg.get("data"):
                    await loop.sock_sendall(sock, bytes(msg["data"]))
                if msg.get("close"):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_WR)
                    return

        pump = asyncio.create_task(pump_input())
        try:
            yield encode({"connected": True})
            while True:
                try:
                    data = await loop.sock_recv(sock, _CHUNK)
                except OSError:
                    data = b""
                if not data:
                    break
                yield encode({"data": data})
            yield encode({"eof": True})
            # the caller ends the call; cancelling its request stream under the call here
            # can fail the call before the eof reaches it
            with contextlib.suppress(OSError):
                await pump
        finally:
            pump.cancel()
            sock.close()

"""pods/portforward on the HTTP front (SPEC SB4), relayed to the kubelet that runs the pod.

Two client protocols, both over a WebSocket upgrade:

- `SPDY/3.1+portforward.k8s.io` (kubectl 1.31+, client-go's tunnelling dialer): the binary
  messages carry a SPDY/3.1 connection. For each local connection kubectl opens an `error`
  and a `data` stream sharing a `requestID` and naming the `port`; the data stream carries
  the TCP bytes both ways (FIN = that side is done), the error stream the reason a
  connection failed, then FIN.
- `v4.channel.k8s.io` (the official Python client's `portforward()`), ports in the `ports`
  query parameter: port i has data channel 2i and error channel 2i+1, each opened by a
  frame holding the port (2 bytes, little-endian).

Each forwarded connection is one PortForward call to the kubelet, which dials the port
inside the pod's network namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import WSMsgType, web

from skiff.api import ApiError
from skiff.apiserver.endpoints.streaming import spdy
from skiff.client.credentials import Credentials
from skiff.client.kubelet import kubelet_channel
from skiff.client.streaming import portforward_call
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import from_grpc

__all__ = ["PORTFORWARD_PROTOCOLS", "SPDY_TUNNEL", "forward_over_websocket", "parse_ports"]

log = logging.getLogger(__name__)

SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"
PORTFORWARD_PROTOCOLS = (SPDY_TUNNEL, "v4.channel.k8s.io", "channel.k8s.io")
_CHUNK = 32 * 1024
RST_CANCEL = 5  # SPDY RST_STREAM status CANCEL

Send = Callable[[bytes], Awaitable[None]]


def parse_ports(values: list[str]) -> list[int]:
    """`?ports=8080,9090&ports=7070` → [8080, 9090, 7070]; a bad port is a 400."""
    ports: list[int] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            if not item.isdigit() or not 0 < int(item) < 65536:
                raise ApiError.bad_request(f'invalid port "{item}": ports must be numbers '
                                           "from 1 to 65535")
            ports.append(int(item))
    return ports


class Forward:
    """One forwarded TCP connection: a PortForward call to the kubelet."""

    def __init__(self, target: str, namespace: str, name: str, port: int,
                 credentials: Credentials | None = None) -> None:
        self.target, self.namespace, self.name, self.port = target, namespace, name, port
        self.credentials = credentials  # to the kubelet's own (mutual TLS) port
        self._channel: grpc.aio.Channel | None = None
        self._call: Any = None
        self._closed = False  # the client said it sends no more
        self._ended = False  # aclose() ran
        # a gRPC call takes one write at a time, the request first: data that the client
        # sends before the kubelet answered waits, and writes go in turn
        self._opened = asyncio.Event()
        self._write_lock = asyncio.Lock()

    async def open(self) -> str | None:
        """Connect to the pod's port; the reason it failed, or None."""
        self._channel = kubelet_channel(self.target, self.credentials)
        self._call = portforward_call(self._channel)
        try:
            async with self._write_lock:
                await self._call.write(encode({"namespace": self.namespace,
                                               "name": self.name, "port": self.port}))
            raw = await self._call.read()
        except grpc.aio.AioRpcError as err:
            self._ended = True
            return from_grpc(err, target=self.target).message
        finally:
            self._opened.set()
        if raw is grpc.aio.EOF or not decode_map(raw).get("connected"):
            self._ended = True
            return f"the kubelet at {self.target} did not connect to port {self.port}"
        return None

    async def write(self, data: bytes) -> None:
        if data and not self._closed and not self._ended:
            await self._send({"data": data})

    async def close_write(self) -> None:
        if not self._closed and not self._ended:
            self._closed = True
            await self._send({"close": True})

    async def _send(self, message: dict[str, Any]) -> None:
        # the call may end under us (the pod closed): what the client still sends is dropped
        # (a write to a cancelled call raises CancelledError, which must not end the session)
        await self._opened.wait()
        async with self._write_lock:
            if self._ended or self._call is None or self._call.done():
                return
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError,
                                     asyncio.InvalidStateError):
                await self._call.write(encode(message))

    async def pump(self, send: Send) -> str | None:
        """Send what the pod's port answers until it closes; an error message, or None."""
        while True:
            try:
                raw = await self._call.read()
            except grpc.aio.AioRpcError as err:
                return from_grpc(err, target=self.target).message
            if raw is grpc.aio.EOF:
                return None
            msg = decode_map(raw)
            if msg.get("data"):
                await send(bytes(msg["data"]))
            if msg.get("eof"):
                return None

    async def aclose(self) -> None:
        self._ended = True
        self._opened.set()
        if self._call is not None:
            self._call.cancel()
        if self._channel is not None:
            await self._channel.close()


@dataclass
class _Pair:
    """kubectl's two SPDY streams for one local connection."""

    port: int
    error_id: int | None = None
    data_id: int | None = None
    forward: Forward | None = None
    task: asyncio.Task[None] | None = None
    early: list[bytes] = field(default_factory=list)  # data before the kubelet connected
    early_fin: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class SpdySession:
    """The server side of kubectl's SPDY connection (over the WebSocket)."""

    def __init__(self, ws: web.WebSocketResponse, target: str, namespace: str,
                 name: str, credentials: Credentials | None = None) -> None:
        self.ws, self.target, self.namespace, self.name = ws, target, namespace, name
        self.credentials = credentials
        self.codec = spdy.HeaderCodec()
        self.parser = spdy.Parser(self.codec)
        self.pairs: dict[str, _Pair] = {}
        self.by_stream: dict[int, _Pair] = {}
        self._write_lock = asyncio.Lock()

    async def send(self, frame: bytes) -> None:
        async with self._write_lock:  # header compression state follows the send order
            if not self.ws.closed:
                await self.ws.send_bytes(frame)

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.BINARY:
                    if msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                        break
                    continue
                try:
                    frames = self.parser.feed(bytes(msg.data))
                except spdy.SpdyError as err:
                    log.info("bad SPDY from a port-forward client", extra={"error": str(err)})
                    await self.send(spdy.goaway_frame(0, 1))
                    break
                for frame in frames:
                    if not await self._on_frame(frame):
                        return
        finally:
            for pair in self.pairs.values():
                if pair.task is not None:
                    pair.task.cancel()
            tasks = [p.task for p in self.pairs.values() if p.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _on_frame(self, frame: spdy.Frame) -> bool:
        if not frame.control:
            pair = self.by_stream.get(frame.stream_id)
            if pair is None or frame.stream_id != pair.data_id:
                return True  # the error stream's (empty) FIN, or a stream we reset
            if pair.forward is None or not pair.ready.is_set():
                pair.early.append(frame.data)
                pair.early_fin = pair.early_fin or frame.fin
            else:
                await pair.forward.write(frame.data)
                if frame.fin:
                    await pair.forward.close_write()
            return True
        if frame.type == spdy.SYN_STREAM:
            await self._on_syn_stream(frame)
        elif frame.type == spdy.PING:
            await self.send(spdy.ping_frame(frame.value))
        elif frame.type == spdy.RST_STREAM:
            pair = self.by_stream.pop(frame.stream_id, None)
            if pair is not None and pair.task is not None:
                pair.task.cancel()
        elif frame.type == spdy.GOAWAY:
            return False
        return True  # SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do

    async def _on_syn_stream(self, frame: spdy.Frame) -> None:
        headers = frame.headers
        kind, request_id = headers.get("streamtype", ""), headers.get("requestid", "")
        try:
            port = int(headers.get("port", ""))
        except ValueError:
            port = 0
        if kind not in ("error", "data") or not 0 < port < 65536:
            await self.send(spdy.rst_stream_frame(frame.stream_id, 1))  # PROTOCOL_ERROR
            return
        await self.send(spdy.syn_reply_frame(self.codec, frame.stream_id))
        pair = self.pairs.setdefault(request_id or str(frame.stream_id), _Pair(port=port))
        self.by_stream[frame.stream_id] = pair
        if kind == "error":
            pair.error_id = frame.stream_id
        else:
            pair.data_id = frame.stream_id
        if pair.error_id is not None and pair.data_id is not None and pair.task is None:
            pair.task = asyncio.create_task(self._forward(pair))

    async def _forward(self, pair: _Pair) -> None:
        assert pair.error_id is not None and pair.data_id is not None
        data_id, error_id = pair.data_id, pair.error_id
        forward = pair.forward = Forward(self.target, self.namespace, self.name, pair.port,
                                         self.credentials)
        try:
            error = await forward.open()
            if error is None:
                for chunk in pair.early:
                    await forward.write(chunk)
                if pair.early_fin:
                    await forward.close_write()
                pair.ready.set()

                async def send(data: bytes) -> None:
                    for i in range(0, len(data), _CHUNK):
                        await self.send(spdy.data_frame(data_id, data[i:i + _CHUNK]))

                error = await forward.pump(send)
            await self.send(spdy.data_frame(data_id, b"", fin=True))
            if error:
                await self.send(spdy.data_frame(error_id, error.encode()))
            await self.send(spdy.data_frame(error_id, b"", fin=True))
        except (ConnectionError, RuntimeError):
            pass  # the client went away
        finally:
            await forward.aclose()


async def _channel_forwards(ws: web.WebSocketResponse, target: str, namespace: str,
                            name: str, ports: list[int],
                            credentials: Credentials | None = None) -> None:
    """The channel protocol: one connection per requested port, opened at once."""
    lock = asyncio.Lock()

    async def send(channel: int, data: bytes) -> None:
        async with lock:
            if not ws.closed:
                await ws.send_bytes(bytes([channel]) + data)

    forwards = [Forward(target, namespace, name, port, credentials) for port in ports]
    tasks: list[asyncio.Task[None]] = []

    async def run(index: int, forward: Forward) -> None:
        data, err = 2 * index, 2 * index + 1
        error = await forward.open()
        if error is None:
            error = await forward.pump(lambda chunk: send(data, chunk))
        if error:
            await send(err, error.encode())

    async def from_client() -> None:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                if msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                    break
                continue
            channel, payload = msg.data[0], bytes(msg.data[1:])
            if channel % 2 == 0 and channel // 2 < len(forwards):
                await forwards[channel // 2].write(payload)

    reader = asyncio.create_task(from_client())
    try:
        for index, (port, forward) in enumerate(zip(ports, forwards, strict=True)):
            opening = struct.pack("<H", port)
            await send(2 * index, opening)
            await send(2 * index + 1, opening)
            tasks.append(asyncio.create_task(run(index, forward)))
        # the connection ends when the client leaves or every pod connection has ended
        # (the client then sees its sockets close, as with Kubernetes' kubelet)
        async def all_ended() -> None:
            await asyncio.gather(*tasks, return_exceptions=True)

        ended = asyncio.create_task(all_ended())
        await asyncio.wait([reader, ended], return_when=asyncio.FIRST_COMPLETED)
        ended.cancel()
    finally:
        reader.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for forward in forwards:
            await forward.aclose()


async def forward_over_websocket(raw: web.Request, target: str, namespace: str,
                                 name: str, credentials: Credentials | None = None
                                 ) -> web.StreamResponse:
    """Upgrade `raw` and forward its connections to the pod's ports until it closes."""
    ports = parse_ports(raw.query.getall("ports", []))
    ws = web.WebSocketResponse(protocols=PORTFORWARD_PROTOCOLS, autoping=True,
                               max_msg_size=0)
    await ws.prepare(raw)
    try:
        if ws.ws_protocol == SPDY_TUNNEL:
            await SpdySession(ws, target, namespace, name, credentials).run()
        elif ports:
            await _channel_forwards(ws, target, namespace, name, ports, credentials)
        else:
            await ws.send_bytes(bytes([1]) + b"no ports to forward: add ?ports=<port>")
    finally:
        await ws.close()
    return ws

"""The cluster DNS server: UDP and TCP port 53 on the `kube-dns` address, in the pod network
namespace, answering from clusterdns.py and forwarding other names upstream.

Why so:
- The sockets are made in the pod network namespace (on a thread that joined it) and bound
  to the DNS address with SO_REUSEPORT, like the service proxy's listeners: every kubelet
  sharing the namespace serves it, and a reply's source is the address the pod asked.
- Names outside the cluster go to the nameservers of the kubelet's `--resolv-conf` (the
  node's /etc/resolv.conf), from sockets in the kubelet's own namespace — the node's
  resolver, as CoreDNS's `forward . /etc/resolv.conf`; without one they get SERVFAIL.
  dnspython parses and builds the messages and does the forwarding (UDP, TCP on truncation).
- A UDP answer larger than the client accepts (512 bytes, or its EDNS size) is sent empty
  with TC set, so the client asks again over TCP.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import struct
from collections.abc import Coroutine
from typing import Any, cast

import dns.asyncquery
import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype
from dns.rdatatype import RdataType

from skiff.kubelet.clusterdns import Answer, ClusterRecords
from skiff.kubelet.sandbox.network import _on_thread, reuseport_socket

__all__ = ["DNSServer"]

log = logging.getLogger(__name__)

MAX_CHASE = 8  # CNAMEs followed inside the zone before giving up


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, server: DNSServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.server.spawn(self._reply(data, addr))

    async def _reply(self, data: bytes, addr: tuple[str, int]) -> None:
        wire = await self.server.respond(data, tcp=False)
        if wire is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(wire, addr)


class DNSServer:
    def __init__(self, records: ClusterRecords, *, address: str, port: int = 53,
                 netns: str | None = None, upstreams: list[str] | None = None,
                 upstream_port: int = 53, upstream_timeout: float = 2.0) -> None:
        self.records = records
        self.address = address
        self.port = port
        self.netns = netns
        self.upstreams = list(upstreams or [])
        self.upstream_port = upstream_port
        self.upstream_timeout = upstream_timeout
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def serving(self) -> bool:
        return self._udp is not None

    async def start(self) -> None:
        """Bind both sockets (in `netns` when given); raises OSError if it cannot."""
        udp = await self._socket(socket.SOCK_DGRAM)
        try:
            tcp = await self._socket(socket.SOCK_STREAM)
        except OSError:
            udp.close()
            raise
        loop = asyncio.get_running_loop()
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _Datagrams(self), sock=udp)
        self._tcp = await asyncio.start_server(self._stream, sock=tcp)

    async def _socket(self, kind: socket.SocketKind) -> socket.socket:
        fn = functools.partial(reuseport_socket, kind, self.address, self.port)
        if self.netns is None:
            return fn()
        return await asyncio.to_thread(_on_thread, fn, join=self.netns)

    async def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None
        if self._tcp is not None:
            self._tcp.close()
            self._tcp = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """DNS over TCP: two-byte length, message; several per connection (RFC 7766)."""
        try:
            while True:
                async with asyncio.timeout(10.0):  # an idle client is let go
                    (size,) = struct.unpack("!H", await reader.readexactly(2))
                    data = await reader.readexactly(size)
                wire = await self.respond(data, tcp=True)
                if wire is None:
                    break
                writer.write(struct.pack("!H", len(wire)) + wire)
                await writer.drain()
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    # --- one query --------------------------------------------------------------------------

    async def respond(self, data: bytes, *, tcp: bool) -> bytes | None:
        """The reply's wire form, or None when the bytes are not a DNS query at all."""
        try:
            query = dns.message.from_wire(data)
        except dns.exception.DNSException:
            return _format_error(data)
        if query.flags & dns.flags.QR:
            return None
        if query.opcode() != dns.opcode.QUERY:
            return _reply(query, dns.rcode.NOTIMP).to_wire()
        if len(query.question) != 1:
            return _reply(query, dns.rcode.FORMERR).to_wire()
        question = query.question[0]
        try:
            response = await self._resolve(query, question.name, question.rdtype, tcp=tcp)
        except Exception as err:  # a bad record must not take the server down
            log.warning("cluster DNS query failed", extra={
                "query": question.name.to_text(), "error": str(err)})
            response = _reply(query, dns.rcode.SERVFAIL)
        limit = 65535 if tcp else max(512, query.payload if query.edns >= 0 else 512)
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            response.answer.clear()
            response.authority.clear()
            response.additional.clear()
            response.flags |= dns.flags.TC
            return response.to_wire(max_size=limit)

    async def _resolve(self, query: dns.message.Message, name: dns.name.Name, rdtype: RdataType,
                       *, tcp: bool) -> dns.message.Message:
        found = self.records.answer(name, rdtype)
        if found is None:
            return await self._forward(query, tcp=tcp)
        response = _reply(query, found.rcode, authoritative=True)
        _fill(response, found)
        chase, hops = found.chase, 0
        while chase is not None and hops < MAX_CHASE:  # an ExternalName's target
            hops += 1
            inside = self.records.answer(chase, rdtype)
            if inside is not None:
                response.answer += inside.answer
                chase = inside.chase
                continue
            upstream = await self._forward(dns.message.make_query(chase, rdtype), tcp=tcp)
            response.answer += upstream.answer
            response.set_rcode(upstream.rcode())
            break
        return response

    async def _forward(self, query: dns.message.Message, *, tcp: bool) -> dns.message.Message:
        for upstream in self.upstreams:
            try:
                if tcp:
                    answer = await dns.asyncquery.tcp(query, upstream, port=self.upstream_port,
                                                      timeout=self.upstream_timeout)
                else:
                    answer, _ = await dns.asyncquery.udp_with_fallback(
                        query, upstream, port=self.upstream_port,
                        timeout=self.upstream_timeout)
            except (dns.exception.DNSException, OSError) as err:
                log.info("upstream nameserver did not answer", extra={
                    "nameserver": upstream, "error": str(err)})
                continue
            answer.id = query.id
            return answer
        return _reply(query, dns.rcode.SERVFAIL)


def _reply(query: dns.message.Message, rcode: dns.rcode.Rcode, *,
           authoritative: bool = False) -> dns.message.Message:
    response = dns.message.make_response(query)
    response.set_rcode(rcode)
    response.flags |= dns.flags.RA
    if authoritative:
        response.flags |= dns.flags.AA
    return response


def _fill(response: dns.message.Message, found: Answer) -> None:
    response.answer += found.answer
    response.authority += found.authority
    response.additional += found.additional


def _format_error(data: bytes) -> bytes | None:
    """FORMERR for a message whose header parses (its id and question echoed back as far
    as they go), nothing for bytes that are not even a header."""
    if len(data) < 12:
        return None
    ident, flags = struct.unpack("!HH", data[:4])
    if flags & 0x8000:  # a response, not a query
        return None
    return struct.pack("!HHHHHH", ident, 0x8000 | (flags & 0x0100) | 0x0080
                       | dns.rcode.FORMERR, 0, 0, 0, 0)

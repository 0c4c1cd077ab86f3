"""The service proxy (SPEC AX7): a pod connecting to a Service's ClusterIP:port reaches a
ready endpoint. It is kube-proxy's userspace mode, run by each kubelet process.

Why userspace and why here:
- Sandboxed pods route everything but their own subnet to their node's gateway, the bridge
  in the pod network namespace (see sandbox/network.py). So the proxy listens *in that
  namespace* — never in the host's: each cluster IP is added there as a /32 on `lo`, and
  one listening socket per (cluster IP, port), bound with SO_REUSEPORT so every kubelet
  sharing the namespace may serve it (the kernel spreads connections among them).
- A relay in the kubelet needs no iptables/nftables rules, kernel modules or conntrack
  state in any namespace, is torn down with the kubelet, and reaches both kinds of
  endpoints: pod IPs (the upstream socket is made in the pod network namespace, where the
  bridge routes to every pod) and the apiservers of the `kubernetes` Service, which listen
  on the host's loopback (endpoints without a pod targetRef, or with a loopback address,
  are dialled from the kubelet's own namespace). TLS to the apiserver passes through
  untouched, so an in-cluster client verifies the apiserver's certificate itself.
- The price is a copy through Python per connection: fine for control traffic and tests,
  not for bulk data. Only TCP is proxied (no UDP/SCTP), no sessionAffinity, no NodePort.
- A connection is answered by a random ready endpoint of the Service's EndpointSlices,
  whose port is the slice port with the Service port's name; with none ready, the
  connection is closed at once (kube-proxy would reject it).

Pods outside a sandbox (hostNetwork, or no root) cannot reach cluster IPs; they get the
apiserver's own address in KUBERNETES_SERVICE_HOST instead (see servicelinks.py).

The cluster DNS (`--cluster-dns`, the `kube-dns` Service's address) is served here too, by
dnsserver.py from the same two informers: its address goes on `lo` with the cluster IPs and
is never proxied, since the kubelet itself answers on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import random
import socket

from pyroute2 import IPRoute, NetlinkError, netns

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.client.informer import Informer
from skiff.kubelet.clusterdns import (
    BY_SERVICE,
    SERVICE_LABEL,
    ClusterRecords,
    slice_service_key,
)
from skiff.kubelet.dnsserver import DNSServer
from skiff.kubelet.sandbox.network import (
    _create_netns,
    _in_netns,
    _on_thread,
    reuseport_socket,
)

__all__ = ["ServiceProxy", "service_ports"]

log = logging.getLogger(__name__)

Key = tuple[str, int]  # (cluster IP, port)


def service_ports(services: list[Obj], *, skip: str | None = None,
                  ) -> dict[Key, tuple[str, str, str]]:
    """(cluster IP, port) → (namespace, service name, port name) for TCP ports, but for
    those of the address `skip` (the cluster DNS, answered by the kubelet itself)."""
    out: dict[Key, tuple[str, str, str]] = {}
    for service in services:
        spec = service.get("spec") or {}
        ip = spec.get("clusterIP")
        if not ip or ip == "None" or spec.get("type") == "ExternalName" or ip == skip:
            continue
        meta = service.get("metadata") or {}
        for port in spec.get("ports") or []:
            if str(port.get("protocol") or "TCP") != "TCP" or port.get("port") is None:
                continue
            out[(str(ip), int(port["port"]))] = (str(meta.get("namespace") or "default"),
                                                 str(meta.get("name")),
                                                 str(port.get("name") or ""))
    return out


def ready_backends(slices: list[Obj], namespace: str, service: str,
                   port_name: str) -> list[tuple[str, int, bool]]:
    """(address, port, is a pod) of the Service's ready endpoints for that port name."""
    out: list[tuple[str, int, bool]] = []
    for s in slices:
        meta = s.get("metadata") or {}
        if meta.get("namespace") != namespace or (meta.get("labels") or {}).get(
                SERVICE_LABEL) != service:
            continue
        port = next((p.get("port") for p in s.get("ports") or []
                     if str(p.get("name") or "") == port_name
                     and str(p.get("protocol") or "TCP") == "TCP"), None)
        if port is None:
            continue
        for endpoint in s.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            is_pod = (endpoint.get("targetRef") or {}).get("kind") == "Pod"
            for address in endpoint.get("addresses") or []:
                out.append((str(address), int(port), is_pod))
    return out


def _plain_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


class ServiceProxy:
    """`run()` until cancelled: keeps one listener per cluster IP:port of every Service."""

    def __init__(self, api: ApiClient, *, namespace: str, resync: float = 1.0,
                 dns_address: str | None = None, cluster_domain: str = "cluster.local",
                 upstreams: list[str] | None = None) -> None:
        self.api = api
        self.namespace = namespace  # the pod network namespace
        self.resync = resync
        self.services = Informer(api, "services")
        self.slices = Informer(api, "endpointslices", indexers={BY_SERVICE: slice_service_key})
        self.dns = None if not dns_address else DNSServer(
            ClusterRecords(cluster_domain, self.services.store, self.slices.store),
            address=dns_address, netns=namespace, upstreams=upstreams)
        self._servers: dict[Key, asyncio.Server] = {}
        self._dirty = asyncio.Event()
        self._connections: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        mark = self._dirty.set
        self.services.add_handler(on_add=lambda _o: mark(), on_update=lambda _a, _b: mark(),
                                  on_delete=lambda _o: mark())
        tasks = [asyncio.create_task(self.services.run(), name="proxy-services"),
                 asyncio.create_task(self.slices.run(), name="proxy-endpointslices")]
        try:
            await self.services.wait_synced()
            await self.slices.wait_synced()
            # Serve from the start, not from the first sandboxed pod: a pod's first DNS
            # query comes milliseconds after its sandbox exists.
            with contextlib.suppress(OSError):  # another kubelet made it meanwhile
                await asyncio.to_thread(_create_netns, self.namespace)
            while True:
                if self.namespace in netns.listnetns():
                    try:
                        await self.sync()
                    except (OSError, NetlinkError) as err:  # e.g. a namespace half made
                        log.warning("service proxy not synced; retrying",
                                    extra={"error": str(err)})
                        self._dirty.set()
                        await asyncio.sleep(self.resync)
                # a removed namespace comes back with the next sandboxed pod: look again soon
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.resync * 5):  # see skiff.tasks
                        await self._dirty.wait()
                self._dirty.clear()
        finally:
            for task in tasks:
                task.cancel()
            for server in self._servers.values():
                server.close()
            if self.dns is not None:
                await self.dns.close()
            for conn in list(self._connections):
                conn.cancel()
            await asyncio.gather(*tasks, *self._connections, return_exceptions=True)

    async def sync(self) -> None:
        dns_ip = self.dns.address if self.dns is not None else None
        wanted = service_ports(self.services.store.list(), skip=dns_ip)
        for key in [k for k in self._servers if k not in wanted]:
            self._servers.pop(key).close()
        gone_ips = {ip for ip, _ in self._servers} - {ip for ip, _ in wanted}
        new = [k for k in wanted if k not in self._servers]
        dns_down = self.dns is not None and not self.dns.serving
        if new or gone_ips or dns_down:
            await asyncio.to_thread(self._addresses, {ip for ip, _ in wanted}
                                    | ({dns_ip} if dns_ip else set()))
        if self.dns is not None and dns_down:
            try:
                await self.dns.start()
                log.info("cluster DNS serving", extra={"address": f"{self.dns.address}:53"})
            except OSError as err:
                log.warning("cannot serve the cluster DNS; retrying", extra={
                    "address": f"{self.dns.address}:53", "error": str(err)})
                self._dirty.set()
        for ip, port in new:
            try:
                sock = await asyncio.to_thread(
                    _on_thread, functools.partial(reuseport_socket, socket.SOCK_STREAM, ip, port),
                    join=self.namespace)
            except OSError as err:
                log.warning("cannot serve a cluster IP", extra={
                    "address": f"{ip}:{port}", "error": str(err)})
                continue
            self._servers[(ip, port)] = await asyncio.start_server(
                functools.partial(self._accept, (ip, port)), sock=sock)

    def _addresses(self, ips: set[str]) -> None:
        """The cluster IPs as /32s on `lo` of the pod network namespace (only there)."""
        def apply(ns: IPRoute) -> None:
            lo = ns.link_lookup(ifname="lo")[0]
            ns.link("set", index=lo, state="up")
            present = {a.get_attr("IFA_ADDRESS") for a in ns.get_addr(index=lo, family=2)
                       if a["prefixlen"] == 32}
            for ip in ips - present:
                with contextlib.suppress(NetlinkError):
                    ns.addr("add", index=lo, address=ip, prefixlen=32)
            for ip in present - ips:
                if not ipaddress.ip_address(ip).is_loopback:
                    with contextlib.suppress(NetlinkError):
                        ns.addr("del", index=lo, address=ip, prefixlen=32)
        _in_netns(self.namespace, apply)

    def _accept(self, key: Key, reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._relay(key, reader, writer),
                                   name=f"proxy:{key[0]}:{key[1]}")
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _relay(self, key: Key, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        target = service_ports(self.services.store.list()).get(key)
        backends = ready_backends(self.slices.store.by_index(
            BY_SERVICE, f"{target[0]}/{target[1]}"), *target) if target else []
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        random.shuffle(backends)
        for address, port, is_pod in backends[:3]:
            try:
                async with asyncio.timeout(5.0):  # not wait_for: see skiff.tasks
                    upstream = await self._connect(address, port, is_pod)
                break
            except (OSError, TimeoutError) as err:
                log.info("service endpoint unreachable", extra={
                    "service": f"{key[0]}:{key[1]}", "endpoint": f"{address}:{port}",
                    "error": str(err)})
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()

    async def _connect(self, address: str, port: int, is_pod: bool
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not is_pod or ipaddress.ip_address(address).is_loopback:
            return await asyncio.open_connection(address, port)
        sock = await asyncio.to_thread(_on_thread, _plain_socket, join=self.namespace)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (address, port))
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

"""Cluster DNS (Kubernetes' DNS-based service discovery specification, schema 1.1.0): the
records the kubelet answers from Services and EndpointSlices, and the server over real
sockets on loopback — UDP, TCP, truncation, forwarding to an upstream, bad input."""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import dns.asyncquery
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest

from skiff.api.types import Obj
from skiff.client.informer import Indexer
from skiff.cluster.processes import free_port
from skiff.kubelet.clusterdns import BY_SERVICE, ClusterRecords, slice_service_key
from skiff.kubelet.dnsserver import DNSServer
from skiff.kubelet.serviceproxy import service_ports


def svc(name: str, ns: str = "default", *, ip: str = "10.96.0.50", ports: list[Obj] | None = None,
        **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "clusterIPs": [ip] if ip != "None" else ["None"],
                     "ports": ports if ports is not None else
                     [{"name": "http", "port": 80, "protocol": "TCP"}], **spec}}


def eslice(service: str, endpoints: list[tuple[str, str | None, bool]], ns: str = "default",
           name: str | None = None) -> Obj:
    return {"metadata": {"name": name or f"{service}-abc", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [a], **({"hostname": h} if h else {}),
                           "conditions": {"ready": r}} for a, h, r in endpoints]}


def records(services: list[Obj], slices: list[Obj]) -> ClusterRecords:
    s, e = Indexer(), Indexer({BY_SERVICE: slice_service_key})
    for o in services:
        s.put(o)
    for o in slices:
        e.put(o)
    return ClusterRecords("cluster.local", s, e)


def ask(r: ClusterRecords, name: str, rdtype: str = "A") -> tuple[int, list[str]] | None:
    found = r.answer(dns.name.from_text(name), dns.rdatatype.from_text(rdtype))
    if found is None:
        return None
    return found.rcode, sorted(rd.to_text() for rrset in found.answer for rd in rrset)


HEADLESS = [svc("nginx", ip="None", ports=[{"name": "web", "port": 80, "protocol": "TCP"}])]
HEADLESS_SLICES = [eslice("nginx", [("10.1.0.5", "web-0", True), ("10.1.1.7", "web-1", True),
                                    ("10.1.0.9", "web-2", False), ("10.1.1.8", None, True)])]


def test_service_with_cluster_ip_has_an_a_record_of_its_cluster_ip() -> None:
    r = records([svc("web")], [])
    assert ask(r, "web.default.svc.cluster.local") == (dns.rcode.NOERROR, ["10.96.0.50"])
    assert ask(r, "WEB.Default.SVC.cluster.LOCAL.") == (dns.rcode.NOERROR, ["10.96.0.50"])


def test_unknown_service_and_namespace_are_nxdomain_and_aaaa_of_a_service_is_empty() -> None:
    r = records([svc("web")], [])
    assert ask(r, "nope.default.svc.cluster.local") == (dns.rcode.NXDOMAIN, [])
    assert ask(r, "web.other.svc.cluster.local") == (dns.rcode.NXDOMAIN, [])
    # glibc asks A and AAAA together: an IPv4 Service's AAAA must be empty, not NXDOMAIN
    assert ask(r, "web.default.svc.cluster.local", "AAAA") == (dns.rcode.NOERROR, [])
    # the search path's first try for `web.default` is this name: it must not exist
    assert ask(r, "web.default.default.svc.cluster.local") == (dns.rcode.NXDOMAIN, [])


def test_negative_answers_carry_the_zone_soa() -> None:
    r = records([], [])
    found = r.answer(dns.name.from_text("nope.default.svc.cluster.local"), dns.rdatatype.A)
    assert found is not None and found.authority[0].rdtype == dns.rdatatype.SOA


def test_headless_service_a_records_are_its_ready_endpoints() -> None:
    r = records(HEADLESS, HEADLESS_SLICES)
    assert ask(r, "nginx.default.svc.cluster.local") == (
        dns.rcode.NOERROR, ["10.1.0.5", "10.1.1.7", "10.1.1.8"])


def test_headless_service_without_ready_endpoints_is_empty_not_nxdomain() -> None:
    r = records(HEADLESS, [eslice("nginx", [("10.1.0.9", "web-2", False)])])
    assert ask(r, "nginx.default.svc.cluster.local") == (dns.rcode.NOERROR, [])


def test_publish_not_ready_addresses_lists_every_endpoint() -> None:
    service = svc("nginx", ip="None", publishNotReadyAddresses=True)
    r = records([service], [eslice("nginx", [("10.1.0.9", "web-2", False)])])
    assert ask(r, "nginx.default.svc.cluster.local") == (dns.rcode.NOERROR, ["10.1.0.9"])


def test_statefulset_pod_has_an_a_record_under_its_headless_service() -> None:
    r = records(HEADLESS, HEADLESS_SLICES)
    assert ask(r, "web-0.nginx.default.svc.cluster.local") == (dns.rcode.NOERROR, ["10.1.0.5"])
    assert ask(r, "web-2.nginx.default.svc.cluster.local") == (dns.rcode.NXDOMAIN, [])
    # an endpoint without a hostname is named by its address with dashes (as CoreDNS)
    assert ask(r, "10-1-1-8.nginx.default.svc.cluster.local") == (
        dns.rcode.NOERROR, ["10.1.1.8"])


def test_srv_records_for_named_ports() -> None:
    r = records([svc("web"), *HEADLESS], HEADLESS_SLICES)
    assert ask(r, "_http._tcp.web.default.svc.cluster.local", "SRV") == (
        dns.rcode.NOERROR, ["0 100 80 web.default.svc.cluster.local."])
    code, srv = ask(r, "_web._tcp.nginx.default.svc.cluster.local", "SRV") or (0, [])
    assert code == dns.rcode.NOERROR
    assert [s.split()[-1] for s in srv] == ["10-1-1-8.nginx.default.svc.cluster.local.",
                                            "web-0.nginx.default.svc.cluster.local.",
                                            "web-1.nginx.default.svc.cluster.local."]
    assert ask(r, "_web._udp.nginx.default.svc.cluster.local", "SRV") == (
        dns.rcode.NXDOMAIN, [])


def test_srv_additional_section_holds_the_targets_addresses() -> None:
    r = records(HEADLESS, HEADLESS_SLICES)
    found = r.answer(dns.name.from_text("_web._tcp.nginx.default.svc.cluster.local"),
                     dns.rdatatype.SRV)
    assert found is not None
    extra = {rrset.name.to_text(): [rd.to_text() for rd in rrset] for rrset in found.additional}
    assert extra["web-1.nginx.default.svc.cluster.local."] == ["10.1.1.7"]


def test_external_name_service_is_a_cname_to_be_chased() -> None:
    r = records([svc("db", ip="", type="ExternalName", externalName="db.example.com")], [])
    found = r.answer(dns.name.from_text("db.default.svc.cluster.local"), dns.rdatatype.A)
    assert found is not None and found.chase == dns.name.from_text("db.example.com")
    assert [rd.to_text() for rd in found.answer[0]] == ["db.example.com."]


def test_pod_a_record_from_its_dashed_address() -> None:
    r = records([], [])
    assert ask(r, "10-1-0-5.default.pod.cluster.local") == (dns.rcode.NOERROR, ["10.1.0.5"])
    assert ask(r, "not-an-ip.default.pod.cluster.local") == (dns.rcode.NXDOMAIN, [])


def test_ptr_records_for_cluster_ips_and_named_headless_endpoints() -> None:
    r = records([svc("web"), *HEADLESS], HEADLESS_SLICES)
    assert ask(r, "50.0.96.10.in-addr.arpa", "PTR") == (
        dns.rcode.NOERROR, ["web.default.svc.cluster.local."])
    assert ask(r, "5.0.1.10.in-addr.arpa", "PTR") == (
        dns.rcode.NOERROR, ["web-0.nginx.default.svc.cluster.local."])
    assert ask(r, "1.1.1.1.in-addr.arpa", "PTR") is None  # not ours: forwarded


def test_dns_version_record_and_names_outside_the_zone() -> None:
    r = records([], [])
    assert ask(r, "dns-version.cluster.local", "TXT") == (dns.rcode.NOERROR, ['"1.1.0"'])
    assert ask(r, "example.com") is None


def test_cluster_dns_address_is_not_proxied() -> None:
    services = [svc("kube-dns", "kube-system", ip="10.96.0.10",
                    ports=[{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]), svc("web")]
    assert set(service_ports(services, skip="10.96.0.10")) == {("10.96.0.50", 80)}


# --- the server, on real loopback sockets ----------------------------------------------------

class Upstream(asyncio.DatagramProtocol):
    """A stand-in for the node's resolver: answers every A query with 192.0.2.1."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        query = dns.message.from_wire(data)
        reply = dns.message.make_response(query)
        reply.answer.append(dns.rrset.from_text(query.question[0].name, 60, "IN", "A",
                                                "192.0.2.1"))
        self.transport.sendto(reply.to_wire(), addr)  # type: ignore[attr-defined]


async def _started(make: Callable[[int], DNSServer]) -> DNSServer:
    """A server on a port free for both UDP and TCP. The port comes from this worker's range
    (below the kernel's ephemeral ports, which outgoing connections may hold at any moment),
    and another is tried if something binds it between the pick and the bind."""
    for _ in range(20):
        dns_server = make(free_port())
        try:
            await dns_server.start()
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            continue
        return dns_server
    raise AssertionError("no loopback port free for both UDP and TCP after 20 tries")


@pytest.fixture
async def server() -> AsyncIterator[DNSServer]:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(Upstream, local_addr=("127.0.0.1", 0))
    up_port = int(transport.get_extra_info("sockname")[1])
    many = [eslice("big", [(f"10.2.{i // 250}.{i % 250 + 1}", None, True) for i in range(60)])]
    external = svc("db", ip="", type="ExternalName", externalName="db.example.com")
    dns_server = await _started(lambda port: DNSServer(
        records([svc("web"), svc("big", ip="None"), external], many), address="127.0.0.1",
        port=port, upstreams=["127.0.0.1"], upstream_port=up_port))
    try:
        yield dns_server
    finally:
        await dns_server.close()
        transport.close()


async def test_server_answers_cluster_names_over_udp_and_tcp(server: DNSServer) -> None:
    query = dns.message.make_query("web.default.svc.cluster.local", "A")
    for send in (dns.asyncquery.udp, dns.asyncquery.tcp):
        reply = await send(query, "127.0.0.1", port=server.port, timeout=2)
        assert reply.rcode() == dns.rcode.NOERROR and reply.flags & dns.flags.AA
        assert [rd.to_text() for rd in reply.answer[0]] == ["10.96.0.50"]


async def test_server_truncates_a_large_udp_answer_and_tcp_carries_it(
        server: DNSServer) -> None:
    query = dns.message.make_query("big.default.svc.cluster.local", "A")
    reply = await dns.asyncquery.udp(query, "127.0.0.1", port=server.port, timeout=2,
                                     ignore_trailing=True)
    assert reply.flags & dns.flags.TC and not reply.answer
    full = await dns.asyncquery.tcp(query, "127.0.0.1", port=server.port, timeout=2)
    assert len(full.answer[0]) == 60


async def test_server_forwards_other_names_to_the_nodes_resolver(server: DNSServer) -> None:
    query = dns.message.make_query("example.com", "A")
    reply = await dns.asyncquery.udp(query, "127.0.0.1", port=server.port, timeout=4)
    assert [rd.to_text() for rd in reply.answer[0]] == ["192.0.2.1"]
    assert not reply.flags & dns.flags.AA


async def test_server_follows_an_external_name_to_the_upstream_answer(
        server: DNSServer) -> None:
    query = dns.message.make_query("db.default.svc.cluster.local", "A")
    reply = await dns.asyncquery.udp(query, "127.0.0.1", port=server.port, timeout=4)
    assert [(r.name.to_text(), [rd.to_text() for rd in r]) for r in reply.answer] == [
        ("db.default.svc.cluster.local.", ["db.example.com."]),
        ("db.example.com.", ["192.0.2.1"])]


async def test_server_without_upstream_answers_servfail(server: DNSServer) -> None:
    server.upstreams = []
    query = dns.message.make_query("example.com", "A")
    reply = await dns.asyncquery.udp(query, "127.0.0.1", port=server.port, timeout=2)
    assert reply.rcode() == dns.rcode.SERVFAIL


async def test_server_answers_garbage_with_formerr_and_keeps_serving(server: DNSServer) -> None:
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setblocking(False)
        await loop.sock_connect(s, ("127.0.0.1", server.port))
        await loop.sock_sendall(s, struct.pack("!HHHHHH", 4242, 0x0100, 1, 0, 0, 0) + b"\xff")
        async with asyncio.timeout(2):
            data = await loop.sock_recv(s, 512)
    ident, flags = struct.unpack("!HH", data[:4])
    assert ident == 4242 and flags & 0xF == dns.rcode.FORMERR
    await test_server_answers_cluster_names_over_udp_and_tcp(server)

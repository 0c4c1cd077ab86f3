"""Cluster DNS answers: Kubernetes' DNS-based service discovery specification (schema
1.1.0), computed from the Services and EndpointSlices the kubelet's service proxy watches.

Why in the kubelet: Skiff has no images to run CoreDNS from, and every sandboxed pod's
packets already reach the pod network namespace where the service proxy serves the cluster
IPs. So each kubelet answers DNS there too, on the `kube-dns` Service's address, like a
node-local DNS cache that is its own source of truth (see dnsserver.py for the sockets).
This module is the pure part: (name, type) → records, no sockets, no clock.

Names in the cluster zone (`<zone>`, e.g. cluster.local), all compared case-insensitively:
- `<svc>.<ns>.svc.<zone>` A: the cluster IP; for a headless Service its ready endpoints'
  addresses (no answer, not NXDOMAIN, when none is ready); ExternalName: a CNAME.
- `<host>.<svc>.<ns>.svc.<zone>` A: a headless Service's ready endpoint, `<host>` being the
  endpoint's `hostname` (StatefulSet pods, `spec.hostname` + `spec.subdomain`) or its
  address with dashes (CoreDNS's choice for endpoints without one).
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>` SRV for each named port (per ready endpoint of
  a headless Service), with the targets' A records as additional records.
- `<a>-<b>-<c>-<d>.<ns>.pod.<zone>` A: that address (CoreDNS's `pods insecure`).
- `dns-version.<zone>` TXT: the schema version.
- `<d>.<c>.<b>.<a>.in-addr.arpa` PTR for cluster IPs and headless endpoints with a hostname.
Anything else in the zone is NXDOMAIN, with the zone's SOA for negative caching; a name
outside the zone (or a reverse name Skiff does not know) is not answered here, the server
forwards it upstream (`None`).
"""

from __future__ import annotations

import builtins
import ipaddress
from dataclasses import dataclass, field
from typing import Protocol

import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
from dns.rdatatype import RdataType

from skiff.api.types import Obj

__all__ = ["SCHEMA_VERSION", "Answer", "ClusterRecords", "slice_service_key"]

SCHEMA_VERSION = "1.1.0"
REVERSE_ZONE = dns.name.from_text("in-addr.arpa.")
SERVICE_LABEL = "kubernetes.io/service-name"


class Store(Protocol):
    def get(self, key: str) -> Obj | None: ...

    def list(self) -> builtins.list[Obj]: ...

    def by_index(self, index: str, value: str) -> builtins.list[Obj]: ...


def slice_service_key(obj: Obj) -> list[str]:
    """Indexer: `namespace/service` of an EndpointSlice (its service-name label)."""
    meta = obj.get("metadata") or {}
    service = (meta.get("labels") or {}).get(SERVICE_LABEL)
    return [f"{meta.get('namespace')}/{service}"] if service else []


BY_SERVICE = "service"


@dataclass
class Answer:
    """A response's content: `chase` is an ExternalName target the server must resolve
    (upstream, or here when it is in the zone) and append, as CoreDNS does."""
    rcode: dns.rcode.Rcode = dns.rcode.NOERROR
    answer: list[dns.rrset.RRset] = field(default_factory=list)
    authority: list[dns.rrset.RRset] = field(default_factory=list)
    additional: list[dns.rrset.RRset] = field(default_factory=list)
    chase: dns.name.Name | None = None


@dataclass(frozen=True)
class _Endpoint:
    address: str
    hostname: str  # the endpoint's hostname, or its address with dashes
    named: bool    # hostname came from the endpoint (gets a PTR record)


class ClusterRecords:
    def __init__(self, zone: str, services: Store, slices: Store, *, ttl: int = 5) -> None:
        self.zone = dns.name.from_text(zone.strip(".") + ".")
        self.services = services
        self.slices = slices  # indexed BY_SERVICE with slice_service_key
        self.ttl = ttl

    # --- the entry point -------------------------------------------------------------------

    def answer(self, qname: dns.name.Name, rdtype: RdataType) -> Answer | None:
        qname = qname.canonicalize()  # lower case, absolute
        if qname.is_subdomain(self.zone):
            labels = [label.decode() for label in qname.relativize(self.zone).labels]
            found = self._in_zone(labels, qname, rdtype)
            return found if found is not None else self._negative(dns.rcode.NXDOMAIN)
        if qname.is_subdomain(REVERSE_ZONE) and rdtype in (dns.rdatatype.PTR,
                                                           dns.rdatatype.ANY):
            return self._reverse(qname)
        return None

    # --- names in the zone ------------------------------------------------------------------

    def _in_zone(self, labels: list[str], qname: dns.name.Name, rdtype: RdataType) -> Answer | None:
        if not labels:
            if rdtype == dns.rdatatype.SOA:
                return Answer(answer=[self._soa()])
            return self._negative(dns.rcode.NOERROR)
        if labels == ["dns-version"]:
            if rdtype in (dns.rdatatype.TXT, dns.rdatatype.ANY):
                return Answer(answer=[self._rrset(qname, dns.rdatatype.TXT,
                                                  [f'"{SCHEMA_VERSION}"'])])
            return self._negative(dns.rcode.NOERROR)
        kind = labels[-1]
        if kind == "pod" and len(labels) == 3:
            return self._pod(labels[0], qname, rdtype)
        if kind in ("svc", "pod") and len(labels) <= 2:
            return self._negative(dns.rcode.NOERROR)  # an intermediate name exists
        if kind != "svc":
            return None
        if len(labels) == 3:
            return self._service(labels[1], labels[0], qname, rdtype)
        if len(labels) == 4:
            return self._endpoint(labels[2], labels[1], labels[0], qname, rdtype)
        if len(labels) == 5 and labels[0].startswith("_") and labels[1].startswith("_"):
            return self._srv(labels[3], labels[2], labels[0][1:], labels[1][1:], qname,
                             rdtype)
        return None

    def _service(self, ns: str, name: str, qname: dns.name.Name,
                 rdtype: RdataType) -> Answer | None:
        service = self.services.get(f"{ns}/{name}")
        if service is None:
            return None
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName":
            target = dns.name.from_text(str(spec.get("externalName") or "").strip(".") + ".")
            out = Answer(answer=[self._rrset(qname, dns.rdatatype.CNAME, [target.to_text()])])
            if rdtype != dns.rdatatype.CNAME:
                out.chase = target
            return out
        if rdtype not in (dns.rdatatype.A, dns.rdatatype.ANY):
            return self._negative(dns.rcode.NOERROR)
        if _headless(spec):
            addresses = sorted({e.address for e in self._ready(ns, name, service)})
        else:
            addresses = [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]
                         if ip and _ipv4(str(ip))]
        if not addresses:
            return self._negative(dns.rcode.NOERROR)
        return Answer(answer=[self._rrset(qname, dns.rdatatype.A, addresses)])

    def _endpoint(self, ns: str, name: str, host: str, qname: dns.name.Name,
                  rdtype: RdataType) -> Answer | None:
        service = self.services.get(f"{ns}/{name}")
        if service is None or not _headless(service.get("spec") or {}):
            return None
        addresses = sorted({e.address for e in self._ready(ns, name, service)
                            if e.hostname == host})
        if not addresses:
            return None
        if rdtype not in (dns.rdatatype.A, dns.rdatatype.ANY):
            return self._negative(dns.rcode.NOERROR)
        return Answer(answer=[self._rrset(qname, dns.rdatatype.A, addresses)])

    def _srv(self, ns: str, name: str, port_name: str, proto: str, qname: dns.name.Name,
             rdtype: RdataType) -> Answer | None:
        service = self.services.get(f"{ns}/{name}")
        if service is None:
            return None
        spec = service.get("spec") or {}
        port = next((p for p in spec.get("ports") or []
                     if str(p.get("name") or "") == port_name and port_name
                     and str(p.get("protocol") or "TCP").lower() == proto), None)
        if port is None:
            return None
        if rdtype not in (dns.rdatatype.SRV, dns.rdatatype.ANY):
            return self._negative(dns.rcode.NOERROR)
        service_name = dns.name.from_text(f"{name}.{ns}.svc", origin=self.zone)
        number = int(port.get("port") or 0)
        if not _headless(spec):
            a = self._service(ns, name, service_name, dns.rdatatype.A)
            return Answer(answer=[self._rrset(qname, dns.rdatatype.SRV,
                                              [f"0 100 {number} {service_name}"])],
                          additional=a.answer if a else [])
        endpoints = sorted(set(self._ready(ns, name, service)), key=lambda e: e.hostname)
        if not endpoints:
            return self._negative(dns.rcode.NOERROR)
        targets = {e.hostname: dns.name.from_text(e.hostname, origin=service_name)
                   for e in endpoints}
        weight = max(1, 100 // len(targets))
        srv = [f"0 {weight} {number} {target}" for target in targets.values()]
        additional = [self._rrset(targets[host], dns.rdatatype.A,
                                  sorted({e.address for e in endpoints if e.hostname == host}))
                      for host in targets]
        return Answer(answer=[self._rrset(qname, dns.rdatatype.SRV, srv)],
                      additional=additional)

    def _pod(self, dashed: str, qname: dns.name.Name, rdtype: RdataType) -> Answer | None:
        try:
            address = ipaddress.IPv4Address(dashed.replace("-", "."))
        except ValueError:
            return None
        if rdtype not in (dns.rdatatype.A, dns.rdatatype.ANY):
            return self._negative(dns.rcode.NOERROR)
        return Answer(answer=[self._rrset(qname, dns.rdatatype.A, [str(address)])])

    # --- reverse names ----------------------------------------------------------------------

    def _reverse(self, qname: dns.name.Name) -> Answer | None:
        labels = [label.decode() for label in qname.relativize(REVERSE_ZONE).labels]
        if len(labels) != 4:
            return None
        address = ".".join(reversed(labels))
        if not _ipv4(address):
            return None
        targets: list[str] = []
        for service in self.services.list():
            meta = service.get("metadata") or {}
            ns, name = str(meta.get("namespace")), str(meta.get("name"))
            spec = service.get("spec") or {}
            if address in (spec.get("clusterIPs") or [spec.get("clusterIP")]):
                targets.append(f"{name}.{ns}.svc.{self.zone}")
            elif _headless(spec):
                targets += [f"{e.hostname}.{name}.{ns}.svc.{self.zone}"
                            for e in self._ready(ns, name, service)
                            if e.named and e.address == address]
        if not targets:
            return None
        return Answer(answer=[self._rrset(qname, dns.rdatatype.PTR, sorted(set(targets)))])

    # --- helpers ----------------------------------------------------------------------------

    def _ready(self, ns: str, name: str, service: Obj) -> list[_Endpoint]:
        """The Service's ready IPv4 endpoints (every endpoint when it publishes not-ready
        addresses), from all its EndpointSlices."""
        everyone = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
        out: list[_Endpoint] = []
        for s in self.slices.by_index(BY_SERVICE, f"{ns}/{name}"):
            if s.get("addressType", "IPv4") != "IPv4":
                continue
            for endpoint in s.get("endpoints") or []:
                if not everyone and (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                hostname = str(endpoint.get("hostname") or "").lower()
                for address in endpoint.get("addresses") or []:
                    if _ipv4(str(address)):
                        out.append(_Endpoint(str(address),
                                             hostname or str(address).replace(".", "-"),
                                             bool(hostname)))
        return out

    def _rrset(self, name: dns.name.Name, rdtype: RdataType, values: list[str]) -> dns.rrset.RRset:
        return dns.rrset.from_text_list(name, self.ttl, dns.rdataclass.IN, rdtype, values)

    def _soa(self) -> dns.rrset.RRset:
        return self._rrset(self.zone, dns.rdatatype.SOA, [
            f"ns.dns.{self.zone} hostmaster.{self.zone} 1 7200 1800 86400 {self.ttl}"])

    def _negative(self, rcode: dns.rcode.Rcode) -> Answer:
        """NXDOMAIN, or NOERROR with no answer (the name exists, not that type): with the
        SOA, so resolvers cache the absence only briefly (RFC 2308)."""
        return Answer(rcode=rcode, authority=[self._soa()])


def _headless(spec: Obj) -> bool:
    return spec.get("clusterIP") == "None"


def _ipv4(address: str) -> bool:
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return False
    return True

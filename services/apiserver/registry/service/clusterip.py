"""Service cluster IPs (SPEC AX7): allocated by the apiserver from the service CIDR.

Kubernetes 1.32 keeps one IPAddress object per allocated address and creates it with a
compare-and-swap, so several apiservers never hand out one address twice. Skiff does the
same with one etcd key per address, `/skiff/serviceips/<ip>`, created only if absent
(`create_revision == 0`) and naming the Service that holds it; it sits outside
`/registry/` so the watch cache and the API never show it.

- create: `spec.clusterIP`/`clusterIPs` empty → a free address of the range (picked at
  random, as Kubernetes does); an explicit address is honoured if it is in the range and
  free; `None` is a headless Service (no address); ExternalName gets none. Anything else
  is 422 Invalid naming `spec.clusterIPs[0]`, with Kubernetes' words.
- update: the addresses may not change once set (an update that leaves them out keeps
  them, as kube-apiserver's `PatchAllocatedValues` does).
- delete: the address is released.
- repair (`ServiceIPRepair`): an address whose Service is gone (an apiserver died between
  allocating and storing, or between deleting and releasing) is released once it has been
  seen unowned on two passes in a row with the same revision.

The first address of the range is reserved for the `default/kubernetes` Service
(see `kubernetesservice.py`).
"""

from __future__ import annotations

import ipaddress
import logging
import random

from skiff.api.errors import ApiError, FieldError, Reason, invalid
from skiff.api.serviceips import DEFAULT_SERVICE_CIDR, kubernetes_service_ip
from skiff.api.types import Obj
from skiff.apiserver.registry.service import holds
from skiff.apiserver.registry.service.holds import HoldRepair
from skiff.apiserver.storage.interface import Storage

__all__ = ["DEFAULT_SERVICE_CIDR", "SERVICE_IP_PREFIX", "ServiceIPRepair", "ServiceIPs",
           "kubernetes_service_ip"]

log = logging.getLogger(__name__)

SERVICE_IP_PREFIX = "/skiff/serviceips/"
HEADLESS = "None"


def _wants_address(spec: Obj) -> bool:
    return spec.get("type") != "ExternalName"


def _requested(spec: Obj) -> tuple[list[str], list[FieldError]]:
    """The addresses the client asked for (clusterIPs, else clusterIP), checked for
    agreement and syntax."""
    ips = [str(ip) for ip in spec.get("clusterIPs") or [] if ip]
    single = str(spec.get("clusterIP") or "")
    if single and ips and ips[0] != single:
        return [], [invalid("spec.clusterIPs", ips,
                            "element [0] must match clusterIP")]
    if single and not ips:
        ips = [single]
    errors: list[FieldError] = []
    if len(ips) > 1:
        errors.append(invalid("spec.clusterIPs", ips,
                              "may only hold up to 1 values (Skiff serves IPv4 single-stack)"))
    for i, ip in enumerate(ips):
        if ip == HEADLESS:
            if i > 0 or len(ips) > 1:
                errors.append(invalid(f"spec.clusterIPs[{i}]", ip,
                                      "'None' must be the first and only value"))
            continue
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            errors.append(invalid(f"spec.clusterIPs[{i}]", ip,
                                  "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    return ips, errors


def _set(spec: Obj, ips: list[str]) -> None:
    if ips:
        spec["clusterIP"], spec["clusterIPs"] = ips[0], list(ips)
    else:
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)


def keep_on_update(old: Obj, new: Obj) -> None:
    """AX7: cluster IPs are immutable; an update that leaves them out keeps the old."""
    old_spec, spec = old.get("spec") or {}, new.setdefault("spec", {})
    old_ips = [str(ip) for ip in old_spec.get("clusterIPs") or
               ([old_spec["clusterIP"]] if old_spec.get("clusterIP") else [])]
    if not spec.get("clusterIP") and not spec.get("clusterIPs"):
        if old_ips and spec.get("type") != "ExternalName":
            _set(spec, old_ips)
        return
    ips, errors = _requested(spec)
    if errors:
        raise holds.invalid_service(new, errors)
    if ips != old_ips:
        raise holds.invalid_service(new, [invalid("spec.clusterIPs[0]", ips[0] if ips else "",
                                     "may not change once set")])
    _set(spec, ips)


class ServiceIPs:
    """The allocator: one etcd key per address, created with a compare-and-swap."""

    def __init__(self, storage: Storage, cidr: str = DEFAULT_SERVICE_CIDR) -> None:
        self.storage = storage
        try:
            self.network = ipaddress.IPv4Network(cidr, strict=False)
        except ValueError:
            raise ValueError(f"--service-cluster-ip-range: {cidr!r} is not an IPv4 "
                             "CIDR (e.g. 10.96.0.0/12)") from None
        if self.network.num_addresses < 8:
            raise ValueError(f"--service-cluster-ip-range: {cidr} is too small (at least "
                             "a /29)")
        self.cidr = str(self.network)

    def _key(self, ip: str) -> str:
        return f"{SERVICE_IP_PREFIX}{ip}"

    def _in_range(self, ip: str) -> bool:
        address = ipaddress.IPv4Address(ip)
        return (address in self.network and address != self.network.network_address
                and address != self.network.broadcast_address)

    async def _allocated(self) -> set[str]:
        return await holds.held(self.storage, SERVICE_IP_PREFIX)

    async def _claim(self, ip: str, service: Obj) -> bool:
        return await holds.claim(self.storage, self._key(ip), "IPAddress", service)

    async def allocate(self, service: Obj, *, dry_run: bool = False) -> list[str]:
        """Fill in the Service's addresses and hold them in etcd (unless `dry_run`);
        returns the addresses held (for `release` if storing the Service fails)."""
        spec = service.setdefault("spec", {})
        ips, errors = _requested(spec)
        if errors:
            raise holds.invalid_service(service, errors)
        if not _wants_address(spec):
            if ips:
                raise holds.invalid_service(service, [invalid(
                    "spec.clusterIPs", ips, "may not be set for ExternalName services")])
            return []
        if ips == [HEADLESS]:
            _set(spec, ips)
            return []
        if ips:
            ip = ips[0]
            if not self._in_range(ip):
                raise holds.invalid_service(service, [invalid(
                    "spec.clusterIPs[0]", ip,
                    f"failed to allocate IP {ip}: the provided IP ({ip}) is not in the "
                    f"valid range. The range of valid IPs is {self.cidr}")])
            held = (await self.storage.get(self._key(ip)))[0] is not None if dry_run \
                else not await self._claim(ip, service)
            if held:
                raise holds.invalid_service(service, [invalid(
                    "spec.clusterIPs[0]", ip,
                    f"failed to allocate IP {ip}: provided IP is already allocated")])
            _set(spec, [ip])
            return [] if dry_run else [ip]
        reserved = kubernetes_service_ip(self.cidr)
        size = self.network.num_addresses - 2
        # Another request (or apiserver) may take the address we picked: pick again. Every
        # lost race means an address was taken, so this ends once the range is full.
        for _ in range(size + 8):
            allocated = await self._allocated()
            if len(allocated | {reserved}) >= size:
                break
            for _ in range(64):
                candidate = str(self.network.network_address + random.randint(1, size))
                if candidate != reserved and candidate not in allocated:
                    break
            else:
                free = (str(a) for a in self.network.hosts())
                candidate = next(a for a in free if a != reserved and a not in allocated)
            if dry_run or await self._claim(candidate, service):
                _set(spec, [candidate])
                return [] if dry_run else [candidate]
        raise ApiError(Reason.INTERNAL_ERROR,
                       f"Internal error occurred: failed to allocate a serviceIP: range is "
                       f"full (the service CIDR {self.cidr})")

    async def release(self, ips: list[str]) -> None:
        for ip in ips:
            if ip != HEADLESS:
                await holds.release(self.storage, self._key(ip))

    async def release_service(self, service: Obj) -> None:
        """Free the addresses a deleted Service held (those its uid holds)."""
        for ip in _held_ips(service):
            await holds.release_held(self.storage, self._key(ip), service)


def _held_ips(service: Obj) -> list[str]:
    """The addresses a Service lists (a headless one holds none)."""
    spec = service.get("spec") or {}
    ips = [str(ip) for ip in spec.get("clusterIPs") or
           ([spec["clusterIP"]] if spec.get("clusterIP") else [])]
    return [ip for ip in ips if ip != HEADLESS]


class ServiceIPRepair(HoldRepair):
    """Releases addresses whose Service is gone (Kubernetes' repair controller)."""

    prefix = SERVICE_IP_PREFIX
    what = "service IPs"

    def in_use(self, services: list[Obj]) -> set[tuple[str, str]]:
        """Every address a live Service's uid holds (an address key names its uid)."""
        return {(str((s.get("metadata") or {}).get("uid", "")), ip) for s in services
                for ip in _held_ips(s)}

"""The `default/kubernetes` Service, its EndpointSlice (SPEC AX7) and its v1 Endpoints, kept
by the apiservers.

As kube-apiserver's "lease" endpoint reconciler: every apiserver holds a key
`/skiff/apiserver-endpoints/<address>:<port>` that it renews every `interval` with an expiry
of three intervals, and then writes the EndpointSlice(s) of `kubernetes` to list exactly the
unexpired ones; on a clean shutdown it removes its own key and rewrites the slices. A
round that fails (etcd unreachable or out of space) is logged and retried the next
interval: it never ends the apiserver. The Service itself (ClusterIP = first address of the
service CIDR, port 443 `https`, no selector) is created if missing. Apiservers on different
ports get one slice per port (an EndpointSlice has one port list for all its endpoints):
`kubernetes` for the lowest port, `kubernetes-<port>` for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

from skiff.api.errors import ApiError, Reason
from skiff.api.serviceips import dns_service_ip, kubernetes_service_ip
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry

__all__ = ["ENDPOINT_PREFIX", "KubernetesService"]

log = logging.getLogger(__name__)

ENDPOINT_PREFIX = "/skiff/apiserver-endpoints/"
SERVICE_NAME = "kubernetes"
NAMESPACE = "default"
DNS_SERVICE_NAME = "kube-dns"
DNS_NAMESPACE = "kube-system"
MANAGED_BY = "endpointslicemirroring-controller.k8s.io"


class KubernetesService:
    def __init__(self, registry: Registry, *, cidr: str, address: str, port: int,
                 interval: float = 10.0) -> None:
        self.registry = registry
        self.storage = registry.storage
        self.cluster_ip = kubernetes_service_ip(cidr)
        self.dns_ip = dns_service_ip(cidr)
        self.address = address
        self.port = port
        self.interval = interval
        self._key = f"{ENDPOINT_PREFIX}{address}:{port}"

    def service(self, target_port: int) -> Obj:
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                             "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"type": "ClusterIP", "clusterIP": self.cluster_ip,
                         "clusterIPs": [self.cluster_ip], "sessionAffinity": "None",
                         "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                    "targetPort": target_port}]}}

    async def _put(self, key: str, value: Obj) -> None:
        kv, _ = await self.storage.get(key)
        if kv is None:
            with contextlib.suppress(ApiError):
                await self.storage.create(key, value)
        else:
            with contextlib.suppress(ApiError):
                await self.storage.update(key, value, expected_revision=kv.mod_revision)

    async def _live_endpoints(self) -> list[tuple[str, int]]:
        kvs, _ = await self.storage.list(ENDPOINT_PREFIX)
        now = time.time()
        live: list[tuple[str, int]] = []
        for kv in kvs:
            if kv.obj is None or float(kv.obj.get("expires", 0)) < now:
                continue
            address, _, port = kv.key.removeprefix(ENDPOINT_PREFIX).rpartition(":")
            live.append((address, int(port)))
        return sorted(live)

    def dns_service(self) -> Obj:
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": DNS_SERVICE_NAME, "namespace": DNS_NAMESPACE,
                             "labels": {"k8s-app": "kube-dns",
                                        "kubernetes.io/cluster-service": "true",
                                        "kubernetes.io/name": "KubeDNS"}},
                "spec": {"type": "ClusterIP", "clusterIP": self.dns_ip,
                         "clusterIPs": [self.dns_ip], "sessionAffinity": "None",
                         "ports": [{"name": "dns", "port": 53, "protocol": "UDP",
                                    "targetPort": 53},
                                   {"name": "dns-tcp", "port": 53, "protocol": "TCP",
                                    "targetPort": 53}]}}

    async def _ensure_service(self) -> None:
        for namespace, name, make in (
                (NAMESPACE, SERVICE_NAME, functools.partial(self.service, self.port)),
                (DNS_NAMESPACE, DNS_SERVICE_NAME, self.dns_service)):
            try:
                await self.registry.get("services", namespace, name)
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
                with contextlib.suppress(ApiError):  # another apiserver made it meanwhile
                    await self.registry.create("services", namespace, make())

    def _slice(self, name: str, port: int, addresses: list[str]) -> Obj:
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": {
                    "kubernetes.io/service-name": SERVICE_NAME,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [a], "conditions": {
                    "ready": True, "serving": True, "terminating": False}}
                    for a in addresses],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}

    async def reconcile(self) -> None:
        """Write the slices to list exactly the live apiservers."""
        live = await self._live_endpoints()
        ports = sorted({port for _, port in live})
        wanted = {(SERVICE_NAME if i == 0 else f"{SERVICE_NAME}-{port}"):
                  self._slice(SERVICE_NAME if i == 0 else f"{SERVICE_NAME}-{port}", port,
                              [a for a, p in live if p == port])
                  for i, port in enumerate(ports)}
        existing = await self.registry.list(
            "endpointslices", NAMESPACE,
            label_selector=f"kubernetes.io/service-name={SERVICE_NAME}")
        for item in existing.get("items") or []:
            name = item["metadata"]["name"]
            want = wanted.pop(name, None)
            if want is None:
                with contextlib.suppress(ApiError):
                    await self.registry.delete("endpointslices", NAMESPACE, name)
                continue
            if (item.get("endpoints"), item.get("ports")) != (want["endpoints"],
                                                             want["ports"]):
                want["metadata"]["resourceVersion"] = item["metadata"]["resourceVersion"]
                with contextlib.suppress(ApiError):
                    await self.registry.update("endpointslices", NAMESPACE, want)
        for want in wanted.values():
            with contextlib.suppress(ApiError):
                await self.registry.create("endpointslices", NAMESPACE, want)
        await self._reconcile_endpoints(live)

    async def _reconcile_endpoints(self, live: list[tuple[str, int]]) -> None:
        """The v1 Endpoints `default/kubernetes`: one subset per port, as kube-apiserver's
        reconciler writes it beside the slices."""
        subsets = [{"addresses": [{"ip": a} for a, p in live if p == port],
                    "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
                   for port in sorted({port for _, port in live})]
        try:
            current = await self.registry.get("endpoints", NAMESPACE, SERVICE_NAME)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            want: Obj = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {
                "name": SERVICE_NAME, "namespace": NAMESPACE,
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}}
            if subsets:
                want["subsets"] = subsets
            with contextlib.suppress(ApiError):
                await self.registry.create("endpoints", NAMESPACE, want)
            return
        if (current.get("subsets") or []) != subsets:
            current["subsets"] = subsets
            with contextlib.suppress(ApiError):
                await self.registry.update("endpoints", NAMESPACE, current)

    async def run(self) -> None:
        """Renew this apiserver's endpoint and reconcile until cancelled; then withdraw."""
        try:
            while True:
                try:
                    await self._put(self._key, {"kind": "ApiserverEndpoint",
                                                "expires": time.time() + 3 * self.interval})
                    await self._ensure_service()
                    await self.reconcile()
                except ApiError as err:
                    # e.g. etcd out of space (SPEC AU10): the next interval tries again.
                    log.info("kubernetes service not reconciled", extra={"error": err.message})
                except Exception as err:  # no etcd error may take the apiserver down
                    log.warning("kubernetes service not reconciled",
                                extra={"error": f"{type(err).__name__}: {err}"})
                await asyncio.sleep(self.interval)
        finally:
            await asyncio.shield(self.withdraw())

    async def withdraw(self) -> None:
        with contextlib.suppress(ApiError, OSError):
            kv, _ = await self.storage.get(self._key)
            if kv is not None:
                await self.storage.delete(self._key, expected_revision=kv.mod_revision)
            await self.reconcile()

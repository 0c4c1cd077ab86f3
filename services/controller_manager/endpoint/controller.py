"""The Endpoints controller (pkg/controller/endpoint): one v1 Endpoints per Service.

Kubernetes still serves v1 Endpoints beside EndpointSlices, and `kubectl get endpoints`,
the documentation's Service tutorials, the official clients' `list_namespaced_endpoints` and
tools such as Prometheus' service discovery read them. For a Service with a selector, every
matching pod with an IP that is not terminal (and not terminating, unless the Service
publishes not-ready addresses) is an address: under `addresses` when Ready (or always with
`publishNotReadyAddresses`), otherwise under `notReadyAddresses`. Each Service port becomes an
endpoint port resolved against the pod (a named targetPort is looked up in its containers;
a pod without it is left out of that port). Addresses with the same ports share a subset
(`RepackSubsets`), sorted by IP. The object is named after the Service, carries its labels
(and `service.kubernetes.io/headless` for a headless one), has no owner, and is deleted
when the Service goes. A Service without a selector keeps endpoints its user writes.
"""

from __future__ import annotations

import copy

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import object_key
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.endpointslice.controller import HEADLESS_LABEL
from skiff.controller_manager.podutil import find_port, is_pod_ready
from skiff.controller_manager.servicebackends import ServiceBackendsController

OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
MAX_ADDRESSES = 1000  # beyond this Kubernetes truncates and annotates "truncated"


def _in_endpoints(pod: Obj, include_terminating: bool) -> bool:
    """ShouldPodBeInEndpoints: an IP, not terminal, not terminating (unless asked)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed") or not status.get("podIP"):
        return False
    return include_terminating or not pod["metadata"].get("deletionTimestamp")


def _address(pod: Obj, service: Obj) -> Obj:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    address: Obj = {"ip": pod["status"]["podIP"]}
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        address["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    address["targetRef"] = {"kind": "Pod", "namespace": meta.get("namespace"),
                            "name": meta["name"], "uid": meta.get("uid")}
    return address


def desired_subsets(service: Obj, pods: list[Obj]) -> list[Obj]:
    """The subsets of a selector Service's Endpoints, repacked by port set."""
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    service_ports = spec.get("ports") or []
    groups: dict[tuple[tuple[str, int, str], ...], tuple[list[Obj], list[Obj]]] = {}
    ports_of: dict[tuple[tuple[str, int, str], ...], list[Obj]] = {}
    for pod in pods:
        if not _in_endpoints(pod, publish):
            continue
        ports: list[Obj] = []
        for service_port in service_ports:
            number = find_port(pod, service_port)
            if number is None:
                continue
            port: Obj = {"name": service_port.get("name", ""), "port": number,
                         "protocol": service_port.get("protocol", "TCP")}
            if not port["name"]:
                del port["name"]
            if service_port.get("appProtocol"):
                port["appProtocol"] = service_port["appProtocol"]
            ports.append(port)
        if service_ports and not ports:
            continue  # no port of the Service resolves on this pod
        key = tuple(sorted((p.get("name", ""), p["port"], p["protocol"]) for p in ports))
        ready, not_ready = groups.setdefault(key, ([], []))
        ports_of[key] = sorted(ports, key=lambda p: (p.get("name", ""), p["port"]))
        (ready if publish or is_pod_ready(pod) else not_ready).append(_address(pod, service))
    subsets: list[Obj] = []
    for key in sorted(groups):
        ready, not_ready = groups[key]
        subset: Obj = {}
        if ready:
            subset["addresses"] = sorted(ready, key=_address_order)
        if not_ready:
            subset["notReadyAddresses"] = sorted(not_ready, key=_address_order)
        if ports_of[key]:
            subset["ports"] = ports_of[key]
        subsets.append(subset)
    return subsets


def _address_order(address: Obj) -> tuple[tuple[int, ...], str]:
    """addrsByIPAndUID: by IP, then by the pod's uid."""
    try:
        ip = tuple(int(part) for part in str(address["ip"]).split("."))
    except ValueError:
        ip = (1 << 16,)
    return ip, str(address["targetRef"].get("uid") or "")


def _truncate(subsets: list[Obj]) -> bool:
    """Keep at most MAX_ADDRESSES addresses, ready ones first; True when some were cut."""
    total = sum(len(s.get("addresses") or []) + len(s.get("notReadyAddresses") or [])
                for s in subsets)
    if total <= MAX_ADDRESSES:
        return False
    room = MAX_ADDRESSES
    for field in ("addresses", "notReadyAddresses"):
        for subset in subsets:
            kept = (subset.get(field) or [])[:room]
            room -= len(kept)
            if kept:
                subset[field] = kept
            else:
                subset.pop(field, None)
    subsets[:] = [s for s in subsets if s.get("addresses") or s.get("notReadyAddresses")]
    return True


class EndpointsController(ServiceBackendsController):
    name = "endpoint"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context)
        self.endpoints = context.informers.resource("endpoints")
        # the initial list finds Endpoints left over from deleted Services
        # (checkLeftoverEndpoints); a deleted Endpoints is written again
        self.endpoints.add_handler(on_add=self._on_endpoints,
                                   on_delete=self._on_endpoints)

    def _on_endpoints(self, endpoints: Obj) -> None:
        if LEADER_ANNOTATION not in (endpoints["metadata"].get("annotations") or {}):
            self.enqueue(object_key(endpoints))

    async def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        service = self.services.store.get(key)
        current = self.endpoints.store.get(key)
        if service is None:
            if current is not None:
                try:
                    await self.client.delete("endpoints", name, namespace=namespace)
                except ApiError as err:
                    if err.reason != Reason.NOT_FOUND:
                        raise
            return None
        spec = service.get("spec") or {}
        selector = spec.get("selector") or {}
        if not selector or spec.get("type") == "ExternalName":
            return None  # endpoints of a Service without a selector are its user's
        subsets = desired_subsets(service, self.selected_pods(namespace, selector))
        labels = dict(service["metadata"].get("labels") or {})
        if spec.get("clusterIP") == "None":
            labels[HEADLESS_LABEL] = ""
        annotations = dict((current or {}).get("metadata", {}).get("annotations") or {})
        if _truncate(subsets):
            annotations[OVER_CAPACITY] = "truncated"
        else:
            annotations.pop(OVER_CAPACITY, None)
        if current is None:
            wanted: Obj = {"apiVersion": "v1", "kind": "Endpoints",
                           "metadata": {"name": name, "namespace": namespace}}
            if labels:
                wanted["metadata"]["labels"] = labels
            if annotations:
                wanted["metadata"]["annotations"] = annotations
            if subsets:
                wanted["subsets"] = subsets
            try:
                await self.client.create(wanted)
            except ApiError as err:
                if err.reason != Reason.ALREADY_EXISTS:
                    raise
                return 0.5  # our cache is behind; look again
            return None
        meta = current["metadata"]
        if ((current.get("subsets") or []) == subsets and (meta.get("labels") or {}) == labels
                and (meta.get("annotations") or {}) == annotations):
            return None
        updated = copy.deepcopy(current)
        updated["metadata"]["labels"] = labels
        updated["metadata"]["annotations"] = annotations
        updated["subsets"] = subsets
        await self.client.update(updated)
        return None

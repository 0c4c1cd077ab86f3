"""The EndpointSlice controller (pkg/controller/endpointslice), one slice per Service.

For a Service with a selector, every pod of its namespace that matches, is bound to a node,
has an IP and is not terminal becomes an endpoint with Kubernetes' three conditions:
`serving` (the pod's Ready condition), `terminating` (deletionTimestamp) and `ready`
(serving and not terminating, or always with `publishNotReadyAddresses`). When the node
lifecycle controller marks the pods of a partitioned node not Ready, their endpoints stop
being ready here, and come back when the node does. Skiff has no kube-proxy: the slices are
what users and clients read (`kubectl get endpointslices`).
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.podutil import find_port, is_pod_ready
from skiff.controller_manager.servicebackends import ServiceBackendsController
from skiff.controller_manager.workload import owner_reference

log = logging.getLogger(__name__)


SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"


def slice_name(service: Obj) -> str:
    return f"{service['metadata']['name']}-{str(service['metadata']['uid'])[:5]}"


def endpoint_of(pod: Obj, *, publish_not_ready: bool, service_name: str = "") -> Obj | None:
    status = pod.get("status") or {}
    ip = status.get("podIP")
    if not ip or not pod["spec"].get("nodeName") or status.get("phase") in (
            "Succeeded", "Failed"):
        return None
    serving = is_pod_ready(pod)
    terminating = bool(pod["metadata"].get("deletionTimestamp"))
    meta = pod["metadata"]
    endpoint: Obj = {"addresses": [ip],
                     "conditions": {"ready": publish_not_ready or (serving and not terminating),
                                    "serving": serving, "terminating": terminating}}
    if pod["spec"].get("hostname") and pod["spec"].get("subdomain") == service_name:
        endpoint["hostname"] = pod["spec"]["hostname"]  # a StatefulSet's stable name
    endpoint.update(nodeName=pod["spec"]["nodeName"],
                    targetRef={"kind": "Pod", "namespace": meta.get("namespace"),
                               "name": meta["name"], "uid": meta.get("uid")})
    return endpoint


def _target_port(port: Obj, pods: list[Obj]) -> int | None:
    for pod in pods or [{}]:
        number = find_port(pod, port)
        if number is not None:
            return number
    return None


def desired_slice(service: Obj, pods: list[Obj]) -> Obj:
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    endpoints = [e for p in sorted(pods, key=lambda p: p["metadata"]["name"])
                 if (e := endpoint_of(p, publish_not_ready=publish,
                                      service_name=service["metadata"]["name"])) is not None]
    ports = []
    for port in spec.get("ports") or []:
        number = _target_port(port, pods)
        entry: Obj = {"name": port.get("name", ""), "protocol": port.get("protocol", "TCP")}
        if number is not None:
            entry["port"] = number
        ports.append(entry)
    meta = service["metadata"]
    labels = {SERVICE_NAME_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGED_BY}
    if spec.get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name(service), "namespace": meta.get("namespace"),
                     "labels": labels,
                     "ownerReferences": [owner_reference(service)]},
        "addressType": "IPv4", "endpoints": endpoints, "ports": ports,
    }


class EndpointSliceController(ServiceBackendsController):
    name = "endpointslice"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context)
        self.slices = context.informers.resource("endpointslices")
        self.slices.add_handler(on_add=self._on_slice,
                                on_update=lambda _o, n: self._on_slice(n),
                                on_delete=self._on_slice)

    def _on_slice(self, es: Obj) -> None:
        name = (es["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name:
            self.enqueue(f"{es['metadata'].get('namespace')}/{name}")

    async def reconcile(self, key: str) -> float | None:
        service = self.services.store.get(key)
        if service is None or service["metadata"].get("deletionTimestamp"):
            return None  # the garbage collector removes its slices
        selector = (service.get("spec") or {}).get("selector") or {}
        if not selector:
            return None  # a Service without selector has user-managed endpoints
        namespace = str(service["metadata"].get("namespace"))
        pods = self.selected_pods(namespace, selector)
        wanted = desired_slice(service, pods)
        current = self.slices.store.get(f"{namespace}/{wanted['metadata']['name']}")
        if current is None:
            try:
                await self.client.create(wanted)
            except ApiError as err:
                if err.reason != Reason.ALREADY_EXISTS:
                    raise
                return 0.5  # our cache is behind; look again
            return None
        if all(current.get(k) == wanted[k] for k in ("endpoints", "ports", "addressType")) \
                and all((current["metadata"].get("labels") or {}).get(k) == v
                        for k, v in wanted["metadata"]["labels"].items()):
            return None
        updated = copy.deepcopy(current)
        updated.update(endpoints=wanted["endpoints"], ports=wanted["ports"])
        updated["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}),
                                         **wanted["metadata"]["labels"]}
        await self.client.update(updated)
        return None

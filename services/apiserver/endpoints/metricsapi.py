"""`metrics.k8s.io/v1beta1` (SPEC AX5), served the way metrics-server serves it, so
`kubectl top pods|nodes` works: NodeMetrics and PodMetrics built from the kubelets' own
measurements (`skiff.kubelet.metrics`), fetched from every node that publishes a kubelet
endpoint when a request comes in. A pod or node the kubelets have no measurement for yet
(less than two samples) is left out, as metrics-server leaves it out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.endpoints.http import Request, Response
from skiff.apiserver.registry.store import Registry
from skiff.client.credentials import Credentials
from skiff.client.logs import kubelet_endpoint
from skiff.client.metrics import fetch_resource_metrics

log = logging.getLogger(__name__)

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP}"
FETCH_TIMEOUT_SECONDS = 5.0


def api_group() -> Obj:
    """The group's entry in `/apis`."""
    gv = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [gv], "preferredVersion": gv}


def _resource_list() -> Obj:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
            "resources": [
                {"name": "nodes", "singularName": "", "namespaced": False,
                 "kind": "NodeMetrics", "verbs": ["get", "list"]},
                {"name": "pods", "singularName": "", "namespaced": True,
                 "kind": "PodMetrics", "verbs": ["get", "list"]}]}


def _cpu(nanocores: int) -> str:
    return f"{int(nanocores)}n"


def _memory(bytes_: int) -> str:
    return f"{int(bytes_) // 1024}Ki"


def _window(seconds: float) -> str:
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


def _target(rest: list[str]) -> tuple[str | None, str, str]:
    """(namespace, resource, name) of the path after `/apis/metrics.k8s.io/v1beta1/`."""
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return namespace, rest[0], (rest[1] if len(rest) > 1 else "")


# (resource, namespace, name) -> raises Forbidden
Authorize = Callable[[str, str | None, str], Awaitable[None]]


class MetricsApi:
    def __init__(self, registry: Registry, *, kubelet: Credentials | None = None) -> None:
        self.registry = registry
        self.kubelet = kubelet or Credentials()  # to the kubelets' own port

    async def handle(self, req: Request, path: str, *,
                     authorize: Authorize | None = None) -> Response:
        if req.method != "GET":
            raise ApiError(Reason.METHOD_NOT_ALLOWED,
                           f"{req.method} is not supported on {GROUP_VERSION}")
        rest = path.removeprefix(PREFIX).strip("/").split("/") if path != PREFIX else []
        if not rest:
            return Response(200, {"kind": "APIGroup", "apiVersion": "v1", **api_group()})
        if rest[0] != VERSION:
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource (group version {GROUP}/{rest[0]})")
        rest = rest[1:]
        if not rest:
            return Response(200, _resource_list())
        namespace, resource, name = _target(rest)
        if authorize is not None:  # `kubectl top` needs list (get) on pods.metrics.k8s.io
            await authorize(resource, namespace, name)
        selector = req.query.get("labelSelector", "")
        if resource == "nodes" and namespace is None:
            return Response(200, await self._nodes(name, selector))
        if resource == "pods":
            return Response(200, await self.pods(namespace, name, selector))
        raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested resource "
                                         f"({resource}.{GROUP})")

    async def _measurements(self, nodes: list[Obj]) -> list[Obj]:
        async def one(node: Obj) -> Obj | None:
            try:
                target = kubelet_endpoint(node)
            except ApiError:
                return None  # no kubelet port published (yet)
            try:
                return await fetch_resource_metrics(target, credentials=self.kubelet,
                                                    timeout=FETCH_TIMEOUT_SECONDS)
            except ApiError as err:
                log.warning("no metrics from node", extra={
                    "node": node["metadata"]["name"], "error": err.message})
                return None

        answers = await asyncio.gather(*(one(n) for n in nodes))
        return [a for a in answers if a is not None]

    async def _nodes(self, name: str, selector: str) -> Obj:
        if name:
            nodes = [await self.registry.get("nodes", None, name)]
        else:
            nodes = (await self.registry.list("nodes", None, label_selector=selector))["items"]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        items = []
        for answer in await self._measurements(nodes):
            for usage in answer.get("nodes") or []:
                node = by_name.get(usage["name"])
                if node is None:
                    continue
                items.append({
                    "metadata": {"name": usage["name"],
                                 "creationTimestamp": usage["timestamp"],
                                 "labels": node["metadata"].get("labels") or {}},
                    "timestamp": usage["timestamp"], "window": _window(usage["window"]),
                    "usage": {"cpu": _cpu(usage["cpu"]), "memory": _memory(usage["memory"])}})
        if name:
            if not items:
                raise ApiError(Reason.NOT_FOUND, f'nodemetrics.metrics.k8s.io "{name}" '
                                                 "not found")
            return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION, **items[0]}
        return {"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
                "items": sorted(items, key=lambda i: i["metadata"]["name"])}

    async def pods(self, namespace: str | None, name: str, selector: str) -> Obj:
        """PodMetrics of one pod, or a PodMetricsList of a namespace's (all namespaces' when
        None) scheduled pods matching `selector`; also the gRPC `PodMetrics` answer, which
        the horizontal pod autoscaler reads."""
        if name:
            pods = [await self.registry.get("pods", namespace, name)]
        else:
            pods = (await self.registry.list("pods", namespace,
                                             label_selector=selector))["items"]
        wanted = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in pods
                  if (p.get("spec") or {}).get("nodeName")}
        node_names = {p["spec"]["nodeName"] for p in wanted.values()}
        nodes = [n for n in (await self.registry.list("nodes", None))["items"]
                 if n["metadata"]["name"] in node_names]
        items = []
        for answer in await self._measurements(nodes):
            for usage in answer.get("pods") or []:
                pod = wanted.get((usage["namespace"], usage["name"]))
                if pod is None:
                    continue
                items.append({
                    "metadata": {"name": usage["name"], "namespace": usage["namespace"],
                                 "creationTimestamp": usage["timestamp"],
                                 "labels": pod["metadata"].get("labels") or {}},
                    "timestamp": usage["timestamp"], "window": _window(usage["window"]),
                    "containers": [{"name": c["name"],
                                    "usage": {"cpu": _cpu(c["cpu"]),
                                              "memory": _memory(c["memory"])}}
                                   for c in usage.get("containers") or []]})
        if name:
            if not items:
                raise ApiError(Reason.NOT_FOUND, f'podmetrics.metrics.k8s.io "{name}" '
                                                 "not found")
            return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION, **items[0]}
        return {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION, "metadata": {},
                "items": sorted(items, key=lambda i: (i["metadata"]["namespace"],
                                                      i["metadata"]["name"]))}


__all__ = ["GROUP_VERSION", "MetricsApi", "api_group"]

"""The apiserver's Prometheus metrics (`GET /metrics`, `kubectl get --raw /metrics`).

Why: Kubernetes' dashboards, alerts and scheduler_perf read kube-apiserver's own series, so
a user comparing Skiff with a cluster wants the same names and labels: requests by verb,
group, version, resource, subresource, scope, component and code
(`apiserver_request_total`), their latency histogram with kube-apiserver's buckets
(`apiserver_request_duration_seconds`, long-running WATCH and CONNECT requests excluded),
requests in flight by kind (`apiserver_current_inflight_requests`), open watches and
streams (`apiserver_longrunning_requests`), plus the process and Python runtime series.
prometheus_client does the exposition format; this module only classifies a request.

Counted are the requests of the Kubernetes HTTP API (kubectl, client libraries); Skiff's own
components call the apiserver over gRPC, which is not counted here. Reading /metrics needs
`get` on the non-resource URL /metrics (cluster-admin, or the `system:monitoring` group,
as in Kubernetes).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from skiff.apiserver.endpoints.handlers.queryparams import query_bool
from skiff.apiserver.endpoints.http import Request, Response

__all__ = ["ApiMetrics", "CONTENT_TYPE", "request_labels"]

CONTENT_TYPE = CONTENT_TYPE_LATEST.replace("; charset=utf-8", "")  # the body's encoding: utf-8
# kube-apiserver's buckets for apiserver_request_duration_seconds
BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10,
           15, 20, 30, 45, 60)
LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope",
          "component")
_LONG_RUNNING = frozenset({"WATCH", "CONNECT"})
_CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy"})


@dataclass(frozen=True)
class _Info:
    verb: str
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    scope: str = ""
    dry_run: str = ""

    def labels(self) -> tuple[str, ...]:
        return (self.verb, self.dry_run, self.group, self.version, self.resource,
                self.subresource, self.scope, "apiserver")


def request_labels(req: Request) -> _Info:
    """kube-apiserver's RequestInfo, cut to the metric labels: LIST vs GET, WATCH, APPLY
    (a server-side apply patch), CONNECT (exec, attach, port-forward), scope
    cluster/namespace/resource."""
    method = req.method
    dry_run = "All" if req.query.get("dryRun") == "All" else ""
    parts = [p for p in req.path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return _Info(verb=method, dry_run=dry_run)  # a non-resource request
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    watching = query_bool(req.query, "watch")
    if method == "GET" and not name:
        verb = "WATCH" if watching else "LIST"
    elif sub in _CONNECT_SUBRESOURCES:
        verb = "CONNECT"
    elif method == "PATCH" and "apply-patch" in req.header("content-type"):
        verb = "APPLY"
    else:
        verb = method
    scope = "resource" if name else ("namespace" if namespace else "cluster")
    return _Info(verb, group, version, resource, sub, scope if resource else "", dry_run)


class ApiMetrics:
    """One apiserver's registry of series; `measure` wraps the HTTP handler."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.requests = Counter(
            "apiserver_request_total", "Counter of apiserver requests broken out for each "
            "verb, dry run value, group, version, resource, scope, component, and HTTP "
            "response code.", [*LABELS, "code"], registry=self.registry)
        self.duration = Histogram(
            "apiserver_request_duration_seconds", "Response latency distribution in seconds "
            "for each verb, dry run value, group, version, resource, subresource, scope and "
            "component.", LABELS, buckets=BUCKETS, registry=self.registry)
        self.inflight = Gauge(
            "apiserver_current_inflight_requests", "Maximal number of currently used inflight "
            "request limit of this apiserver per request kind in last second.",
            ["request_kind"], registry=self.registry)
        self.longrunning = Gauge(
            "apiserver_longrunning_requests", "Gauge of all active long-running apiserver "
            "requests broken out by verb, group, version, resource, scope and component.",
            [label for label in LABELS if label != "dry_run"], registry=self.registry)

    def exposition(self) -> Response:
        return Response(200, generate_latest(self.registry), content_type=CONTENT_TYPE)

    async def measure(self, req: Request,
                      handle: Callable[[Request], Awaitable[Response]]) -> Response:
        info = request_labels(req)
        kind = "readOnly" if req.method in ("GET", "HEAD", "OPTIONS") else "mutating"
        inflight = self.inflight.labels(kind)
        inflight.inc()
        start = time.perf_counter()
        try:
            response = await handle(req)
        finally:
            inflight.dec()
        labels = info.labels()
        self.requests.labels(*labels, str(response.status)).inc()
        if info.verb not in _LONG_RUNNING:
            self.duration.labels(*labels).observe(time.perf_counter() - start)
        elif response.stream is not None:
            response.stream = self._counted(response.stream, info)
        return response

    async def _counted(self, inner: AsyncIterator[Any], info: _Info) -> AsyncIterator[Any]:
        """The stream, with `apiserver_longrunning_requests` up while it is open."""
        gauge = self.longrunning.labels(*(v for k, v in zip(LABELS, info.labels(),
                                                            strict=True) if k != "dry_run"))
        gauge.inc()
        try:
            async for item in inner:
                yield item
        finally:
            gauge.dec()
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()

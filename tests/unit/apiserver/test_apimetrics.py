"""The apiserver's /metrics labels, as kube-apiserver's RequestInfo classifies requests:
LIST vs GET, WATCH, APPLY, CONNECT, scope; long-running requests out of the histogram."""

from __future__ import annotations

from collections.abc import AsyncIterator

from skiff.apiserver.endpoints.apimetrics import ApiMetrics, request_labels
from skiff.apiserver.endpoints.http import Request, Response


def req(method: str, path: str, query: dict[str, str] | None = None,
        content_type: str = "") -> Request:
    return Request(method, path, query or {}, {"content-type": content_type}, b"")


def test_request_labels_follow_kube_apiservers_request_info() -> None:
    cases = {
        ("GET", "/api/v1/namespaces/d/pods"): ("LIST", "", "v1", "pods", "", "namespace"),
        ("GET", "/api/v1/pods"): ("LIST", "", "v1", "pods", "", "cluster"),
        ("GET", "/api/v1/namespaces/d/pods/p"): ("GET", "", "v1", "pods", "", "resource"),
        ("POST", "/apis/apps/v1/namespaces/d/deployments"): (
            "POST", "apps", "v1", "deployments", "", "namespace"),
        ("PUT", "/apis/apps/v1/namespaces/d/deployments/w/scale"): (
            "PUT", "apps", "v1", "deployments", "scale", "resource"),
        ("GET", "/api/v1/namespaces/d"): ("GET", "", "v1", "namespaces", "", "resource"),
        ("POST", "/api/v1/namespaces/d/pods/p/exec"): (
            "CONNECT", "", "v1", "pods", "exec", "resource"),
        ("GET", "/version"): ("GET", "", "", "", "", ""),
    }
    for (method, path), want in cases.items():
        info = request_labels(req(method, path))
        assert (info.verb, info.group, info.version, info.resource, info.subresource,
                info.scope) == want, path
    assert request_labels(req("GET", "/api/v1/pods", {"watch": "true"})).verb == "WATCH"
    assert request_labels(req("PATCH", "/api/v1/namespaces/d/pods/p",
                              content_type="application/apply-patch+yaml")).verb == "APPLY"
    assert request_labels(req("POST", "/api/v1/namespaces/d/pods",
                              {"dryRun": "All"})).dry_run == "All"


async def test_watch_is_counted_as_long_running_not_in_the_latency_histogram() -> None:
    metrics = ApiMetrics()

    async def events() -> AsyncIterator[bytes]:
        yield b"{}"

    async def watch(_: Request) -> Response:
        return Response(200, stream=events())

    response = await metrics.measure(req("GET", "/api/v1/pods", {"watch": "1"}), watch)
    assert response.stream is not None
    gauge = metrics.longrunning.labels("WATCH", "", "v1", "pods", "", "cluster", "apiserver")
    items = [item async for item in response.stream]
    assert items == [b"{}"] and gauge._value.get() == 0
    body = metrics.exposition().body.decode()
    assert 'verb="WATCH"' in body.split("apiserver_request_total", 1)[1]
    assert 'verb="WATCH"' not in "".join(
        line for line in body.splitlines() if line.startswith("apiserver_request_duration"))

"""SPEC EX8: what the aggregator sends an extension apiserver and what it lists — the
front-proxy headers (client-go's `SetAuthProxyHeaders`), the client's own credentials never
passed on, the `/apis` merge ordered by the APIServices' priorities, the request parts
authorized before proxying, and 503 for an APIService that is not available."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.hooks import ServiceRef
from skiff.apiserver.aggregator import ApiServiceTable, Proxier, Registration
from skiff.apiserver.aggregator.discovery import merge_groups, version_order_key
from skiff.apiserver.aggregator.front import request_parts
from skiff.apiserver.aggregator.headers import (
    escape_extra_key,
    forwarded_headers,
    user_headers,
)
from skiff.apiserver.endpoints.http import Request
from skiff.auth import UserInfo

ALICE = UserInfo(name="alice", uid="42", groups=("devs", "system:authenticated"),
                 extra={"scopes.example.com/team": ("a", "b"), "reason": ("on call",)})


def remote(group: str, version: str, *, group_priority: int = 100,
           version_priority: int = 100, available: bool = True) -> Registration:
    return Registration(name=f"{version}.{group}", group=group, version=version,
                        group_priority=group_priority, version_priority=version_priority,
                        service=ServiceRef(namespace="ex8", name="ext"), available=available)


def test_ex8_the_user_goes_in_front_proxy_headers_one_group_each() -> None:
    assert user_headers(ALICE) == [
        ("X-Remote-User", "alice"), ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-scopes.example.com%2Fteam", "a"),
        ("X-Remote-Extra-scopes.example.com%2Fteam", "b"),
        ("X-Remote-Extra-reason", "on call")]


@pytest.mark.parametrize(("key", "escaped"), [
    pytest.param("reason", "reason", id="plain"),
    pytest.param("example.com/team", "example.com%2Fteam", id="slash"),
    pytest.param("100%", "100%25", id="percent"),
    pytest.param("a b", "a%20b", id="space"),
])
def test_ex8_extra_keys_are_escaped_as_header_names(key: str, escaped: str) -> None:
    assert escape_extra_key(key) == escaped


def test_ex8_the_clients_credentials_and_spoofed_identity_stay_behind() -> None:
    sent = forwarded_headers({
        "authorization": "Bearer secret", "impersonate-user": "root",
        "x-remote-user": "mallory", "x-remote-group": "system:masters",
        "connection": "keep-alive", "accept": "application/json",
        "content-type": "application/json", "user-agent": "kubectl/v1.32"}, ALICE)
    names = [name.lower() for name, _ in sent]
    assert "authorization" not in names and "impersonate-user" not in names
    assert "connection" not in names
    assert [v for n, v in sent if n.lower() == "x-remote-user"] == ["alice"]
    assert [v for n, v in sent if n.lower() == "x-remote-group"] == [
        "devs", "system:authenticated"]
    assert ("accept", "application/json") in sent and ("user-agent", "kubectl/v1.32") in sent


def test_ex8_versions_follow_kubernetes_preference_order() -> None:
    versions = ["v1alpha1", "v2", "v1beta1", "foo", "v1", "v1beta2", "v10"]
    assert sorted(versions, key=version_order_key) == [
        "v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]


def test_ex8_aggregated_groups_join_discovery_ordered_by_priority() -> None:
    served: list[Obj] = [{"name": "apps", "versions": [{"groupVersion": "apps/v1",
                                                         "version": "v1"}],
                          "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]
    local = Registration(name="v1.apps", group="apps", version="v1")
    merged = merge_groups(served, [
        local, remote("low.example.com", "v1", group_priority=10),
        remote("metrics.example.com", "v1alpha1", version_priority=50),
        remote("metrics.example.com", "v1beta1", version_priority=50),
        remote("metrics.example.com", "v1", version_priority=10),
        remote("apps", "v2beta1", available=False)])
    assert [g["name"] for g in merged] == ["apps", "metrics.example.com", "low.example.com"]
    assert [v["version"] for v in merged[0]["versions"]] == ["v1", "v2beta1"]
    metrics = merged[1]
    assert [v["groupVersion"] for v in metrics["versions"]] == [
        "metrics.example.com/v1beta1", "metrics.example.com/v1alpha1",
        "metrics.example.com/v1"]  # versionPriority first, then kube's version order
    assert metrics["preferredVersion"] == {"groupVersion": "metrics.example.com/v1beta1",
                                           "version": "v1beta1"}
    assert served[0]["versions"] == [{"groupVersion": "apps/v1", "version": "v1"}]


@pytest.mark.parametrize(("rest", "parts"), [
    pytest.param(["widgets"], (None, "widgets", "", ""), id="cluster-list"),
    pytest.param(["namespaces", "ns", "widgets", "w", "status"],
                 ("ns", "widgets", "w", "status"), id="namespaced-subresource"),
    pytest.param(["namespaces", "ns"], (None, "namespaces", "ns", ""), id="a-namespace"),
    pytest.param(["nodes", "n1"], (None, "nodes", "n1", ""), id="cluster-object"),
])
def test_ex8_proxied_paths_are_authorized_as_kube_reads_them(
        rest: list[str], parts: tuple[str | None, str, str, str]) -> None:
    assert request_parts(rest) == parts


def test_ex8_only_remote_apiservices_take_paths() -> None:
    table = ApiServiceTable()
    table.replace([
        {"metadata": {"name": "v1beta1.metrics.example.com"},
         "spec": {"group": "metrics.example.com", "version": "v1beta1",
                  "service": {"namespace": "ex8", "name": "ext"}},
         "status": {"conditions": [{"type": "Available", "status": "True"}]}},
        {"metadata": {"name": "v1beta1.metrics.k8s.io"},
         "spec": {"group": "metrics.k8s.io", "version": "v1beta1"}}])
    found = table.remote("metrics.example.com/v1beta1")
    assert found is not None and found.available and found.service == ServiceRef(
        namespace="ex8", name="ext", port=443)
    assert found.server_name == "ext.ex8.svc"
    assert table.remote("metrics.k8s.io/v1beta1") is None  # Local: served here
    table.remove("v1beta1.metrics.example.com")
    assert table.remote("metrics.example.com/v1beta1") is None


class _NoResolver:
    async def resolve(self, ref: ServiceRef) -> tuple[str, int]:
        raise AssertionError("an unavailable APIService is never dialled")


async def test_ex8_an_unavailable_apiservice_answers_503() -> None:
    proxier = Proxier(_NoResolver())
    answer = await proxier.forward(
        remote("metrics.example.com", "v1beta1", available=False),
        Request("GET", "/apis/metrics.example.com/v1beta1/widgets", {}, {}, b""), ALICE)
    assert (answer.status, answer.body) == (503, "service unavailable\n")
    assert answer.content_type.startswith("text/plain")


def test_ex8_a_new_or_changed_apiservice_is_checked_at_once_a_status_write_is_not() -> None:
    changes: list[int] = []
    table = ApiServiceTable(on_change=lambda: changes.append(1))
    obj: Obj = {"metadata": {"name": "v1beta1.metrics.example.com"},
                "spec": {"group": "metrics.example.com", "version": "v1beta1",
                         "service": {"namespace": "ex8", "name": "ext"}}}
    table.put(obj)
    assert len(changes) == 1
    table.put({**obj, "status": {"conditions": [{"type": "Available", "status": "True"}]}})
    assert len(changes) == 1  # the controller's own write
    table.put({**obj, "spec": {**obj["spec"], "service": {"namespace": "ex8",
                                                          "name": "other"}}})
    assert len(changes) == 2


class _RecordingGuard:
    def __init__(self) -> None:
        self.asked: list[dict[str, object]] = []

    async def http_resource(self, **attributes: object) -> None:
        self.asked.append(attributes)


@pytest.mark.parametrize(("path", "query", "asked"), [
    pytest.param("/apis/metrics.example.com/v1beta1/namespaces/ns/widgets/w", {},
                 {"namespace": "ns", "resource": "widgets", "name": "w", "subresource": "",
                  "query": {}}, id="get"),
    pytest.param("/apis/metrics.example.com/v1beta1/watch/namespaces/ns/widgets", {},
                 {"namespace": "ns", "resource": "widgets", "name": "", "subresource": "",
                  "query": {"watch": "true"}}, id="deprecated-watch-path"),
    pytest.param("/apis/metrics.example.com/v1beta1", {}, None, id="discovery-is-not-a-resource"),
])
async def test_ex8_the_request_is_authorized_here_before_it_is_proxied(
        path: str, query: dict[str, str], asked: dict[str, object] | None) -> None:
    from typing import cast

    from skiff.apiserver.aggregator import Aggregator
    from skiff.apiserver.endpoints.guard import RequestGuard
    from skiff.apiserver.registry.store import Registry, RegistryConfig
    from skiff.apiserver.storage.memory import MemoryStorage
    from skiff.apiserver.storage.watchcache import WatchCache
    store = MemoryStorage()
    aggregator = Aggregator(Registry(store, WatchCache(store),
                                     config=RegistryConfig(pod_security=None)))
    guard = _RecordingGuard()
    answer = await aggregator.proxy(
        Request("GET", path, query, {}, b""),
        remote("metrics.example.com", "v1beta1", available=False),
        guard=cast(RequestGuard, guard))
    assert answer.status == 503
    expected = [] if asked is None else [{"method": "GET", "group": "metrics.example.com",
                                          **asked}]
    assert guard.asked == expected

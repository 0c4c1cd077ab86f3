"""The Endpoints controller's subsets (pkg/controller/endpoint, RepackSubsets) as pure logic."""

from __future__ import annotations

from typing import Any

from skiff.api.types import Obj
from skiff.controller_manager.endpoint.controller import (
    MAX_ADDRESSES,
    _truncate,
    desired_subsets,
)
from skiff.controller_manager.endpointslice.controller import desired_slice


def _pod(name: str, ip: str, *, ready: bool = True, port: int | None = None,
         phase: str = "Running", deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ports = [{"name": "http", "containerPort": port}] if port else []
    return {"metadata": meta,
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": ports}]},
            "status": {"phase": phase, "podIP": ip, "conditions": [
                {"type": "Ready", "status": "True" if ready else "False"}]}}


def _service(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"},
            "spec": {"ports": [{"name": "web", "port": 80, "targetPort": "http"}], **spec}}


def test_wl6_endpoints_addresses_with_the_same_ports_share_a_subset_sorted_by_ip() -> None:
    pods = [_pod("b", "10.0.0.10", port=8080), _pod("a", "10.0.0.9", port=8080),
            _pod("c", "10.0.0.5", port=9090, ready=False),
            _pod("none", "10.0.0.6")]  # no port named http: left out
    subsets = desired_subsets(_service(), pods)
    assert [[a["ip"] for a in s.get("addresses") or []] for s in subsets] == [
        ["10.0.0.9", "10.0.0.10"], []]
    assert subsets[1]["notReadyAddresses"][0]["targetRef"]["name"] == "c"
    assert subsets[0]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]


def test_wl6_endpoints_leave_out_terminal_and_terminating_pods_unless_not_ready_is_published(
) -> None:
    pods = [_pod("done", "10.0.0.1", port=80, phase="Succeeded"),
            _pod("going", "10.0.0.2", port=80, deleting=True),
            _pod("slow", "10.0.0.3", port=80, ready=False)]
    plain = desired_subsets(_service(), pods)
    assert plain == [{"notReadyAddresses": [plain[0]["notReadyAddresses"][0]],
                      "ports": [{"name": "web", "port": 80, "protocol": "TCP"}]}]
    published = desired_subsets(_service(publishNotReadyAddresses=True), pods)
    assert [a["ip"] for a in published[0]["addresses"]] == ["10.0.0.2", "10.0.0.3"]


def test_wl6_endpoints_a_headless_service_without_ports_lists_bare_addresses() -> None:
    subsets = desired_subsets(_service(ports=[], clusterIP="None"), [_pod("a", "10.0.0.1")])
    assert subsets == [{"addresses": [subsets[0]["addresses"][0]]}]
    assert "ports" not in subsets[0]


def test_wl6_endpoints_more_than_a_thousand_addresses_are_truncated_ready_first() -> None:
    subsets = [{"addresses": [{"ip": f"10.0.{i // 250}.{i % 250}"} for i in range(990)],
                "notReadyAddresses": [{"ip": f"10.1.0.{i}"} for i in range(20)]}]
    assert _truncate(subsets)
    assert len(subsets[0]["addresses"]) == 990
    assert len(subsets[0]["notReadyAddresses"]) == MAX_ADDRESSES - 990
    assert not _truncate(subsets)


def test_wl6_a_statefulset_pods_hostname_is_on_its_headless_services_endpoints() -> None:
    """Both views carry `hostname` for a pod whose subdomain is the Service (a StatefulSet's
    stable network identity), and both are labelled headless."""
    pod = _pod("web-0", "10.0.0.1", port=80)
    pod["spec"].update(hostname="web-0", subdomain="svc")
    service = _service(clusterIP="None")
    [subset] = desired_subsets(service, [pod])
    assert subset["addresses"][0]["hostname"] == "web-0"
    es = desired_slice(service | {"metadata": {"name": "svc", "namespace": "ns",
                                               "uid": "12345678"}}, [pod])
    assert es["endpoints"][0]["hostname"] == "web-0"
    assert es["metadata"]["labels"]["service.kubernetes.io/headless"] == ""
    other = desired_slice(_service() | {"metadata": {"name": "other", "namespace": "ns",
                                                     "uid": "12345678"}}, [pod])
    assert "hostname" not in other["endpoints"][0]
    assert "service.kubernetes.io/headless" not in other["metadata"]["labels"]

"""SPEC AX7: cluster IP rules that need no etcd (the allocation itself, with its
compare-and-swap across two apiservers, is in tests/integration/test_cluster_ips.py)."""

from __future__ import annotations

import pytest

from skiff.api import ApiError
from skiff.api.serviceips import kubernetes_service_ip
from skiff.api.types import Obj
from skiff.apiserver.registry.service.clusterip import keep_on_update


def svc(**spec: object) -> Obj:
    return {"kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "ClusterIP", **spec}}


def test_ax7_kubernetes_service_ip_is_the_first_address_of_the_range() -> None:
    assert kubernetes_service_ip("10.96.0.0/12") == "10.96.0.1"
    assert kubernetes_service_ip("172.20.8.0/22") == "172.20.8.1"


def test_ax7_update_without_cluster_ips_keeps_the_allocated_ones() -> None:
    new = svc(ports=[{"port": 80}])
    keep_on_update(svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.9"]), new)
    assert new["spec"]["clusterIP"] == "10.96.0.9"
    assert new["spec"]["clusterIPs"] == ["10.96.0.9"]


def test_ax7_update_repeating_cluster_ip_alone_is_accepted() -> None:
    new = svc(clusterIP="10.96.0.9")
    keep_on_update(svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.9"]), new)
    assert new["spec"]["clusterIPs"] == ["10.96.0.9"]


@pytest.mark.parametrize("change", [
    {"clusterIP": "10.96.0.10"},
    {"clusterIPs": ["10.96.0.10"]},
    {"clusterIP": "None"},
])
def test_ax7_cluster_ips_may_not_change_once_set(change: Obj) -> None:
    with pytest.raises(ApiError) as refused:
        keep_on_update(svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.9"]), svc(**change))
    assert refused.value.code == 422
    assert "spec.clusterIPs[0]: Invalid value:" in refused.value.message
    assert refused.value.message.endswith("may not change once set")


def test_ax7_cluster_ip_and_cluster_ips_must_agree() -> None:
    with pytest.raises(ApiError) as refused:
        keep_on_update(svc(clusterIP="10.96.0.9"),
                       svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.8"]))
    assert "element [0] must match clusterIP" in refused.value.message


def test_ax7_update_without_type_or_cluster_ips_keeps_them() -> None:
    """`kubectl replace` of the original manifest (no type, no clusterIP)."""
    new: Obj = {"kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
    keep_on_update(svc(clusterIP="10.96.0.9", clusterIPs=["10.96.0.9"]), new)
    assert new["spec"]["clusterIPs"] == ["10.96.0.9"]

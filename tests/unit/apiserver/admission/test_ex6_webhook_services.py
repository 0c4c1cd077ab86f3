"""SPEC EX6: a webhook's `clientConfig.service` is resolved as kube-apiserver's endpoint
routing does — the Service port named by `service.port`, a ready address of its
EndpointSlices with that port's target — else the cluster IP; a missing Service or port is
a failed call with Kubernetes' words."""

from __future__ import annotations

import pytest

from skiff.api import lookup
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.client import CallFailed, ServiceResolver
from skiff.apiserver.admission.webhook.hooks import ServiceRef
from skiff.apiserver.storage.memory import MemoryStorage


def _service(cluster_ip: str = "10.96.0.10") -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "hook", "namespace": "ns"},
            "spec": {"clusterIP": cluster_ip,
                     "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}


def _slice(address: str, *, ready: bool = True, service: str = "hook") -> Obj:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service}-{address}", "namespace": "ns",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
            "ports": [{"name": "https", "port": 8443}]}


async def _resolve(*objs: Obj, port: int = 443) -> tuple[str, int]:
    storage = MemoryStorage()
    for obj in objs:
        info = lookup(obj["kind"])
        await storage.create(storage_key(info, "ns", obj["metadata"]["name"]), obj)
    return await ServiceResolver(storage).resolve(ServiceRef("ns", "hook", "/x", port))


async def test_ex6_service_resolves_to_a_ready_endpoint_and_its_target_port() -> None:
    assert await _resolve(_service(), _slice("10.1.0.4", ready=False), _slice("10.1.0.5"),
                          _slice("10.9.9.9", service="other")) == ("10.1.0.5", 8443)


async def test_ex6_service_without_endpoints_resolves_to_its_cluster_ip() -> None:
    assert await _resolve(_service()) == ("10.96.0.10", 443)


@pytest.mark.parametrize(("objs", "port", "message"), [
    pytest.param((), 443, 'service "hook" not found', id="no-service"),
    pytest.param((_service(),), 444, 'no service port 444 found for service "hook"',
                 id="no-port"),
    pytest.param((_service("None"),), 443, 'no endpoints available for service "hook"',
                 id="headless-no-endpoints"),
])
async def test_ex6_unresolvable_service_is_a_failed_call(objs: tuple[Obj, ...], port: int,
                                                         message: str) -> None:
    with pytest.raises(CallFailed) as err:
        await _resolve(*objs, port=port)
    assert str(err.value) == message

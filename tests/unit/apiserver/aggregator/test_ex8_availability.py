"""SPEC EX8: the APIServices' Available condition, as kube-aggregator's availability
controllers set it — Local for the group/versions the apiserver serves (made at start, and
for every served CRD version), and for a remote one the Service, EndpointSlice and
discovery checks with kube's reasons and messages — over the apiserver's Registry on
in-memory storage, with the backend's discovery answer faked."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.hooks import ServiceRef
from skiff.apiserver.aggregator import AvailabilityController, Registration
from skiff.apiserver.aggregator.availability import endpoint_verdict, with_condition
from skiff.apiserver.aggregator.local import AUTOMANAGED_LABEL
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

REG = Registration(name="v1beta1.metrics.example.com", group="metrics.example.com",
                   version="v1beta1", service=ServiceRef(namespace="ex8", name="ext"))


class FakeBackend:
    """The discovery check's answer (None: it passed)."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.checked: list[str] = []

    async def discovery_check(self, reg: Registration) -> str | None:
        self.checked.append(reg.name)
        return self.failure


def service(**spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "ext", "namespace": "ex8"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}], **spec}}


def endpoint_slice(*, ready: bool = True, port_name: str = "https") -> Obj:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "ext-1", "namespace": "ex8",
                         "labels": {"kubernetes.io/service-name": "ext"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": ready}}],
            "ports": [{"name": port_name, "port": 8443, "protocol": "TCP"}]}


@pytest.mark.parametrize(("svc", "slices", "expected"), [
    pytest.param(None, [], ("ServiceNotFound", 'service/ext in "ex8" is not present'),
                 id="no-service"),
    pytest.param(service(ports=[{"name": "https", "port": 8443}]), [],
                 ("ServicePortError", 'service/ext in "ex8" is not listening on port 443'),
                 id="wrong-port"),
    pytest.param(service(), [], ("EndpointsNotFound",
                                 'cannot find endpointslices for service/ext in "ex8"'),
                 id="no-slices"),
    pytest.param(service(), [endpoint_slice(ready=False)],
                 ("MissingEndpoints", 'endpointslices for service/ext in "ex8" have no '
                                      'addresses with port name "https"'), id="not-ready"),
    pytest.param(service(), [endpoint_slice(port_name="other")],
                 ("MissingEndpoints", 'endpointslices for service/ext in "ex8" have no '
                                      'addresses with port name "https"'), id="port-name"),
    pytest.param(service(), [endpoint_slice()], None, id="ready"),
    pytest.param(service(type="ExternalName", externalName="x.example.com"), [], None,
                 id="not-cluster-ip-skips-endpoints"),
])
def test_ex8_service_and_endpoint_checks_give_kubes_reasons(
        svc: Obj | None, slices: list[Obj], expected: tuple[str, str] | None) -> None:
    verdict = endpoint_verdict(REG, svc, slices)
    assert (None if verdict is None else (verdict.reason, verdict.message)) == expected
    assert verdict is None or verdict.status == "False"


def test_ex8_the_transition_time_moves_only_with_the_status() -> None:
    from skiff.apiserver.aggregator.availability import PASSED, Verdict
    first = with_condition({}, PASSED, "t1")
    assert first == {"conditions": [{"type": "Available", "status": "True",
                                     "lastTransitionTime": "t1", "reason": "Passed",
                                     "message": "all checks passed"}]}
    assert with_condition({"status": first}, PASSED, "t2") is None  # nothing to write
    failing = with_condition({"status": first}, Verdict("False", "FailedDiscoveryCheck",
                                                        "boom"), "t3")
    assert failing is not None and failing["conditions"][0]["lastTransitionTime"] == "t3"
    other = Verdict("False", "ServiceNotFound", "gone")
    again = with_condition({"status": failing}, other, "t4")
    assert again is not None and again["conditions"][0]["lastTransitionTime"] == "t3"


async def _registry() -> Registry:
    store = MemoryStorage()
    return Registry(store, WatchCache(store), config=RegistryConfig(pod_security=None))


def _remote_api_service() -> Obj:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": REG.name},
            "spec": {"group": REG.group, "version": REG.version,
                     "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"namespace": "ex8", "name": "ext"}}}


def _condition(registry_obj: Obj) -> tuple[str, str, str]:
    c = next(c for c in registry_obj["status"]["conditions"] if c["type"] == "Available")
    return c["status"], c["reason"], c["message"]


async def test_ex8_local_apiservices_exist_for_served_groups_and_are_available() -> None:
    registry = await _registry()
    await AvailabilityController(registry, FakeBackend()).sync_once()
    listed = {o["metadata"]["name"]: o for o in
              (await registry.list("apiservices", None))["items"]}
    for name in ("v1.", "v1.apps", "v2.autoscaling", "v1.apiregistration.k8s.io",
                 "v1beta1.metrics.k8s.io", "v1.authorization.k8s.io"):
        assert _condition(listed[name]) == (
            "True", "Local", "Local APIServices are always available"), name
        assert listed[name]["metadata"]["labels"] == {AUTOMANAGED_LABEL: "onstart"}
    assert listed["v1."]["spec"] == {"group": "", "version": "v1",
                                     "groupPriorityMinimum": 18000, "versionPriority": 1}


async def test_ex8_a_crds_versions_get_local_apiservices_while_served() -> None:
    registry = await _registry()
    crd: Obj = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "crontabs.stable.example.com"},
                "spec": {"group": "stable.example.com", "scope": "Namespaced",
                         "names": {"plural": "crontabs", "kind": "CronTab"},
                         "versions": [{"name": "v1", "served": True, "storage": True},
                                      {"name": "v2", "served": False, "storage": False}]}}
    await registry.ensure(crd)
    controller = AvailabilityController(registry, FakeBackend())
    await controller.sync_once()
    made = await registry.get("apiservices", None, "v1.stable.example.com")
    assert made["metadata"]["labels"] == {AUTOMANAGED_LABEL: "true"}
    assert made["spec"]["groupPriorityMinimum"] == 1000
    assert await registry.get_or_none("apiservices", None, "v2.stable.example.com") is None
    await registry.delete("customresourcedefinitions", None, "crontabs.stable.example.com")
    await controller.sync_once()
    assert await registry.get_or_none("apiservices", None, "v1.stable.example.com") is None


async def test_ex8_a_remote_apiservice_is_checked_through_its_service() -> None:
    registry = await _registry()
    backend = FakeBackend()
    controller = AvailabilityController(registry, backend)
    await registry.create("apiservices", None, _remote_api_service())
    await controller.sync_once()
    stored = await registry.get("apiservices", None, REG.name)
    assert _condition(stored) == ("False", "ServiceNotFound",
                                  'service/ext in "ex8" is not present')
    await registry.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "ex8"}})
    await registry.create("services", "ex8", service())
    await registry.create("endpointslices", "ex8", endpoint_slice())
    await controller.sync_once()
    assert _condition(await registry.get("apiservices", None, REG.name)) == (
        "True", "Passed", "all checks passed")
    assert REG.name in backend.checked
    backend.failure = "failing or missing response from https://127.0.0.1:8443/apis/x: boom"
    await controller.sync_once()
    assert _condition(await registry.get("apiservices", None, REG.name)) == (
        "False", "FailedDiscoveryCheck", backend.failure)

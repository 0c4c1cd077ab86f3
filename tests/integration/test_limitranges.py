"""LimitRange and LimitRanger admission against a real etcd and apiserver, with the
Kubernetes documentation's examples ("Configure Default Memory Requests and Limits for a
Namespace", "Configure Minimum and Maximum CPU Constraints for a Namespace")."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.objects import pod


def _limit_range(name: str, namespace: str, *items: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"limits": list(items)}}


def _with_resources(body: Obj, **resources: Obj) -> Obj:
    body["spec"]["containers"][0]["resources"] = resources
    return body


async def test_ax6_limitranger_gives_containers_the_namespaces_default_memory(
        api: ApiClient, namespace: str) -> None:
    await api.create(_limit_range("mem-limit-range", namespace, {
        "type": "Container", "default": {"memory": "512Mi"},
        "defaultRequest": {"memory": "256Mi"}}))
    plain = await api.create(pod("default-mem-demo", namespace))
    assert plain["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "512Mi"}, "requests": {"memory": "256Mi"}}
    assert plain["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: memory request for container main; memory limit for "
        "container main")
    # only a limit: Kubernetes' defaulting copied it to the request before LimitRanger
    limited = await api.create(_with_resources(pod("default-mem-demo-2", namespace),
                                               limits={"memory": "1Gi"}))
    assert limited["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}
    # only a request: the limit is the namespace's default
    requested = await api.create(_with_resources(pod("default-mem-demo-3", namespace),
                                                 requests={"memory": "128Mi"}))
    assert requested["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "512Mi"}, "requests": {"memory": "128Mi"}}


async def test_ax6_limitranger_refuses_a_container_outside_min_and_max(
        api: ApiClient, namespace: str) -> None:
    stored = await api.create(_limit_range("cpu-min-max-demo-lr", namespace, {
        "type": "Container", "max": {"cpu": "800m"}, "min": {"cpu": "200m"}}))
    item = stored["spec"]["limits"][0]  # SetDefaults_LimitRangeItem
    assert item["default"] == {"cpu": "800m"} and item["defaultRequest"] == {"cpu": "800m"}
    with pytest.raises(ApiError) as too_big:
        await api.create(_with_resources(pod("constraints-cpu-demo-2", namespace),
                                         limits={"cpu": "1.5"}, requests={"cpu": "500m"}))
    assert too_big.value.reason == Reason.FORBIDDEN
    assert too_big.value.message == (
        'pods "constraints-cpu-demo-2" is forbidden: maximum cpu usage per Container is '
        "800m, but limit is 1500m")
    with pytest.raises(ApiError) as too_small:
        await api.create(_with_resources(pod("constraints-cpu-demo-3", namespace),
                                         limits={"cpu": "800m"}, requests={"cpu": "100m"}))
    assert too_small.value.message.endswith(
        "minimum cpu usage per Container is 200m, but request is 100m")
    fits = await api.create(pod("constraints-cpu-demo-4", namespace))
    assert fits["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "800m"}, "requests": {"cpu": "800m"}}
    with pytest.raises(ApiError):
        await api.get("pods", "constraints-cpu-demo-2", namespace)  # nothing was stored


async def test_ax6_limitranger_bounds_a_pods_total_and_a_claims_storage(
        api: ApiClient, namespace: str) -> None:
    await api.create(_limit_range("totals", namespace,
                                  {"type": "Pod", "max": {"memory": "1Gi"}},
                                  {"type": "PersistentVolumeClaim",
                                   "max": {"storage": "2Gi"}, "min": {"storage": "1Gi"}}))
    body = pod("two", namespace)
    body["spec"]["containers"].append(dict(body["spec"]["containers"][0], name="side"))
    for container in body["spec"]["containers"]:
        container["resources"] = {"limits": {"memory": "768Mi"}}
    with pytest.raises(ApiError) as err:
        await api.create(body)
    assert err.value.message == ('pods "two" is forbidden: maximum memory usage per Pod is '
                                 "1Gi, but limit is 1536Mi")
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "big", "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "5Gi"}}}}
    with pytest.raises(ApiError) as err:
        await api.create(claim)
    assert err.value.message == ('persistentvolumeclaims "big" is forbidden: maximum '
                                 "storage usage per PersistentVolumeClaim is 2Gi, but limit "
                                 "is 5Gi")


async def test_as7_limit_range_validation_names_the_field(api: ApiClient, namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(_limit_range("bad", namespace, {
            "type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}))
    assert err.value.reason == Reason.INVALID
    assert "spec.limits[0].min[cpu]" in err.value.message
    assert "min value 2 is greater than max value 1" in err.value.message
    with pytest.raises(ApiError) as err:
        await api.create(_limit_range("bad", namespace, {
            "type": "Pod", "default": {"cpu": "1"}}))
    assert "spec.limits[0].default: Forbidden" in err.value.message


async def test_as7_limitranger_defaults_are_validated_like_the_users_own(
        api: ApiClient, namespace: str) -> None:
    """Kubernetes validates after mutating admission: a default limit below the request the
    pod states makes an invalid pod, refused, not stored."""
    await api.create(_limit_range("low-default", namespace, {
        "type": "Container", "default": {"cpu": "500m"}}))
    with pytest.raises(ApiError) as err:
        await api.create(_with_resources(pod("greedy", namespace), requests={"cpu": "1"}))
    assert err.value.reason == Reason.INVALID
    assert "spec.containers[0].resources.requests[cpu]" in err.value.message
    assert "must be less than or equal to cpu limit of 500m" in err.value.message

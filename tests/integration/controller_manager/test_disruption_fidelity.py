"""AS8 as Kubernetes 1.32 does it, with the real disruption controller
and the apiserver's eviction subresource: an empty selector covers every pod of the
namespace in both; pods without a controller are reported (UnmanagedPods) instead of
zeroing a relative budget; a not-ready pod may go without spending the budget when the
budget is healthy (IfHealthyBudget) or always (AlwaysAllow)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import rfc3339
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import (
    KubeletDouble,
    get_or_none,
    recorded,
    wait_for,
)
from tests.integration.controller_manager.workloads import replica_set
from tests.integration.objects import pod


def budget(namespace: str, selector: Obj, **spec: Any) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "budget", "namespace": namespace},
            "spec": {"selector": selector, **spec}}


async def status_is(api: ApiClient, namespace: str, **want: int) -> Obj | None:
    pdb = await api.get("poddisruptionbudgets", "budget", namespace)
    status: Obj = pdb.get("status") or {}
    return status if all(status.get(k) == v for k, v in want.items()) else None


async def not_ready(api: ApiClient, namespace: str, name: str) -> None:
    """The kubelet reports the pod Running but not Ready."""
    now = rfc3339(time.time())
    p = await api.get("pods", name, namespace)
    p["status"].update(phase="Running", conditions=[
        {"type": "Ready", "status": "False", "lastTransitionTime": now}])
    await api.update_status(p)


async def test_as8_empty_selector_covers_every_pod_of_the_namespace(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "disruption")
    async with KubeletDouble(api, f"e-{namespace}") as kubelet:
        for name in ("a", "b"):
            await api.create(pod(name, namespace, labels={"app": name}))
            await kubelet.run_pod(namespace, name)
        await api.create(budget(namespace, {}, minAvailable=1))
        await wait_for(lambda: status_is(api, namespace, expectedPods=2, currentHealthy=2,
                                         disruptionsAllowed=1),
                       timeout=10, what="the budget to cover both pods")
        await api.evict(namespace, "a")
        with pytest.raises(ApiError) as refused:
            await api.evict(namespace, "b")
        assert refused.value.reason == Reason.TOO_MANY_REQUESTS


async def test_as8_unmanaged_pods_are_reported_not_zeroing_the_budget(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "replicaset,disruption")
    async with KubeletDouble(api, f"u-{namespace}") as kubelet:
        await api.create(replica_set("db", namespace, replicas=2))

        async def two() -> list[Obj] | None:
            items: list[Obj] = (await api.list("pods", namespace))["items"]
            return items if len(items) == 2 else None

        for p in await wait_for(two, timeout=10, what="2 ReplicaSet pods"):
            await kubelet.run_pod(namespace, str(p["metadata"]["name"]))
        # The stray pod is outside the ReplicaSet's selector (a matching orphan would be
        # adopted by it, as Kubernetes does) but inside the budget's.
        await api.create(pod("stray", namespace, labels={"app": "db-stray"}))
        await kubelet.run_pod(namespace, "stray")
        await api.create(budget(namespace, {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["db", "db-stray"]}]},
            maxUnavailable=1))
        # Scale 2 from the ReplicaSet (the stray pod has no controller): desired 1; the
        # three Ready pods are healthy, so two disruptions are allowed.
        await wait_for(lambda: status_is(api, namespace, expectedPods=2, desiredHealthy=1,
                                         currentHealthy=3, disruptionsAllowed=2),
                       timeout=10, what="the budget from the ReplicaSet's scale")
        assert await recorded(api, namespace, reason="UnmanagedPods", name="budget")


async def test_as8_expected_zero_allows_no_disruption(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "disruption")
    async with KubeletDouble(api, f"z-{namespace}") as kubelet:
        await api.create(pod("only", namespace, labels={"app": "x"}))
        await kubelet.run_pod(namespace, "only")
        await api.create(budget(namespace, {"matchLabels": {"app": "x"}}, maxUnavailable=1))
        await wait_for(lambda: status_is(api, namespace, expectedPods=0, currentHealthy=1,
                                         disruptionsAllowed=0),
                       timeout=10, what="an unmanaged-only budget that allows nothing")


@pytest.mark.parametrize(("policy", "ready", "evictable"), [
    pytest.param(None, 2, True, id="if-healthy-budget-default-budget-healthy"),
    pytest.param("IfHealthyBudget", 1, False, id="if-healthy-budget-budget-unhealthy"),
    pytest.param("AlwaysAllow", 1, True, id="always-allow"),
])
async def test_as8_not_ready_pod_eviction_follows_unhealthy_pod_eviction_policy(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        policy: str | None, ready: int, evictable: bool) -> None:
    controller_manager("--controllers", "disruption")
    async with KubeletDouble(api, f"h-{namespace}") as kubelet:
        names = ["p0", "p1", "sick"]
        for name in names:
            await api.create(pod(name, namespace, labels={"app": "w"}))
            await kubelet.run_pod(namespace, name)
        for name in names[ready:]:
            await not_ready(api, namespace, name)
        spec: Obj = {"minAvailable": 2}
        if policy:
            spec["unhealthyPodEvictionPolicy"] = policy
        await api.create(budget(namespace, {"matchLabels": {"app": "w"}}, **spec))
        await wait_for(lambda: status_is(api, namespace, currentHealthy=ready,
                                         disruptionsAllowed=0),
                       timeout=10, what="a budget with no disruption left")
        if evictable:
            await api.evict(namespace, "sick")
            gone_or_terminating = await get_or_none(api, "pods", "sick", namespace)
            assert gone_or_terminating is None or \
                gone_or_terminating["metadata"].get("deletionTimestamp")
        else:
            with pytest.raises(ApiError) as refused:
                await api.evict(namespace, "sick")
            assert refused.value.reason == Reason.TOO_MANY_REQUESTS

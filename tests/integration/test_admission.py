"""SPEC PP1–PP2 (priority admission) and PS2's default NoExecute tolerations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.objects import pod, priority_class
from tests.integration.waiting import wait_for


async def test_pp1_builtin_system_classes_exist(api: ApiClient) -> None:
    critical = await api.get("priorityclasses", "system-cluster-critical")
    node = await api.get("priorityclasses", "system-node-critical")
    assert critical["value"] == 2_000_000_000
    assert node["value"] == 2_000_001_000


async def test_pp1_user_class_value_is_at_most_one_billion(api: ApiClient) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(priority_class("too-high", 1_000_000_001))
    assert err.value.reason == Reason.INVALID
    assert "value" in err.value.message
    ok = await api.create(priority_class("max-user", 1_000_000_000))
    assert ok["preemptionPolicy"] == "PreemptLowerPriority"


async def test_pp1_system_prefix_is_reserved(api: ApiClient) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(priority_class("system-mine", 10))
    assert err.value.reason == Reason.INVALID


async def test_pp1_at_most_one_global_default(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target) as api:
        await api.create(priority_class("default-a", 100, global_default=True))
        with pytest.raises(ApiError) as err:
            await api.create(priority_class("default-b", 200, global_default=True))
        assert err.value.reason == Reason.INVALID
        assert "already marked as default" in err.value.message


async def test_pp2_priority_class_name_resolves_into_spec_priority(
        api: ApiClient, namespace: str) -> None:
    await api.create(priority_class(f"{namespace}-high", 1000, policy="Never"))
    created = await api.create(pod("p", namespace, priority_class=f"{namespace}-high"))
    assert created["spec"]["priority"] == 1000
    assert created["spec"]["preemptionPolicy"] == "Never"


async def test_pp2_a_pod_may_not_contradict_its_classes_preemption_policy(
        api: ApiClient, namespace: str) -> None:
    """Kubernetes' priority admission: a pod may repeat its class's preemptionPolicy but
    not contradict it (403), and without a class the policy is PreemptLowerPriority."""
    await api.create(priority_class(f"{namespace}-polite", 1000, policy="Never"))
    contradicting = pod("p", namespace, priority_class=f"{namespace}-polite",
                        preemptionPolicy="PreemptLowerPriority")
    with pytest.raises(ApiError) as err:
        await api.create(contradicting)
    assert err.value.reason == Reason.FORBIDDEN
    assert ("the string value of PreemptionPolicy (PreemptLowerPriority) must not be "
            "provided in pod spec; priority admission controller computed Never"
            in err.value.message)
    with pytest.raises(ApiError) as err:
        await api.create(pod("q", namespace, preemptionPolicy="Never"))  # no class
    assert err.value.reason == Reason.FORBIDDEN
    repeating = await api.create(pod("r", namespace, priority_class=f"{namespace}-polite",
                                     preemptionPolicy="Never"))
    assert repeating["spec"]["preemptionPolicy"] == "Never"


async def test_pp2_unknown_class_is_rejected(api: ApiClient, namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(pod("p", namespace, priority_class="no-such-class"))
    assert err.value.reason == Reason.FORBIDDEN
    assert "no PriorityClass with name no-such-class was found" in err.value.message


async def test_pp2_system_class_is_usable(api: ApiClient, namespace: str) -> None:
    created = await api.create(pod("p", namespace, priority_class="system-node-critical"))
    assert created["spec"]["priority"] == 2_000_001_000


async def test_pp2_no_class_means_zero_without_a_global_default(api: ApiClient,
                                                                namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    assert created["spec"]["priority"] == 0


async def test_pp2_no_class_takes_the_global_default(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target) as api:
        await api.create(priority_class("everyday", 77, global_default=True))
        # Admission reads classes from a watch-fed cache, as Kubernetes' plugin reads its
        # informer: a pod created the same instant may still get 0; soon every pod gets 77.
        for attempt in range(100):
            created = await api.create(pod(f"p{attempt}", "default"))
            if created["spec"]["priority"] == 77:
                break
            assert created["spec"]["priority"] == 0, created["spec"]
            await asyncio.sleep(0.1)
        assert created["spec"]["priority"] == 77
        assert created["spec"]["priorityClassName"] == "everyday"


async def test_pp2_changing_or_deleting_a_class_never_changes_existing_pods(
        api: ApiClient, namespace: str) -> None:
    name = f"{namespace}-mid"
    await api.create(priority_class(name, 500))
    await api.create(pod("p", namespace, priority_class=name))
    cls = await api.get("priorityclasses", name)
    cls["description"] = "changed"
    await api.update(cls)
    await api.delete("priorityclasses", name)
    assert (await api.get("pods", "p", namespace))["spec"]["priority"] == 500

    # Admission reads classes from a watch-fed cache, as Kubernetes' plugin reads an
    # informer: a create right after the delete may still see the class.
    tries = iter(range(1000))

    async def refused() -> ApiError | None:
        try:
            created = await api.create(pod(f"q{next(tries)}", namespace,
                                           priority_class=name))
        except ApiError as err:
            return err
        await api.delete("pods", created["metadata"]["name"], namespace,
                         grace_period_seconds=0)
        return None

    err = await wait_for(refused, timeout=10, what="a pod of the deleted class refused")
    assert err.reason == Reason.FORBIDDEN


async def test_pp2_priority_value_in_spec_must_match_the_class(api: ApiClient,
                                                               namespace: str) -> None:
    with pytest.raises(ApiError) as err:
        await api.create(pod("p", namespace, priority=99))
    assert err.value.reason == Reason.INVALID
    assert "spec.priority" in err.value.message


async def test_ps2_pods_get_default_not_ready_and_unreachable_tolerations(
        api: ApiClient, namespace: str) -> None:
    created = await api.create(pod("p", namespace))
    tolerations = {t["key"]: t for t in created["spec"]["tolerations"]}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        assert tolerations[key] == {"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300}


async def test_ps2_an_existing_toleration_is_kept(api: ApiClient, namespace: str) -> None:
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
           "effect": "NoExecute", "tolerationSeconds": 5}
    created = await api.create(pod("p", namespace, tolerations=[own]))
    unreachable = [t for t in created["spec"]["tolerations"]
                   if t["key"] == "node.kubernetes.io/unreachable"]
    assert unreachable == [own]


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule"])
async def test_ps2_a_toleration_for_another_effect_does_not_stop_the_defaults(
        api: ApiClient, namespace: str, effect: str) -> None:
    """As Kubernetes' DefaultTolerationSeconds: only a toleration covering NoExecute (or
    every effect) for the key (or every key) counts; tolerating every key for `effect`
    alone still gets the two 300 s NoExecute tolerations."""
    own = {"operator": "Exists", "effect": effect}
    created = await api.create(pod("p", namespace, tolerations=[own]))
    added = {t["key"]: t["tolerationSeconds"] for t in created["spec"]["tolerations"]
             if t.get("key")}
    assert added == {"node.kubernetes.io/not-ready": 300,
                     "node.kubernetes.io/unreachable": 300}
    every = await api.create(pod("every", namespace, tolerations=[{"operator": "Exists"}]))
    assert every["spec"]["tolerations"] == [{"operator": "Exists"}]


async def test_ps2_default_toleration_seconds_are_configurable(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, apiserver_args=[
        "--default-unreachable-toleration-seconds", "5",
        "--default-not-ready-toleration-seconds", "7"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target) as api:
            created = await api.create(pod("p", "default"))
        seconds = {t["key"]: t["tolerationSeconds"] for t in created["spec"]["tolerations"]}
        assert seconds == {"node.kubernetes.io/not-ready": 7,
                           "node.kubernetes.io/unreachable": 5}
    finally:
        cluster.stop()

"""The scheduler against a real apiserver and etcd, for Kubernetes behaviours users see
with pod (anti-)affinity and nominations: replicas with hostname anti-affinity land on
different nodes and the extra one waits until a node frees up (InterPodAffinity Filter +
retry on AssignedPodDelete); a pod with affinity to another app waits for it and then
joins its zone (retry on AssignedPodAdd); a stale nominatedNodeName is cleared and the
node's resources are no longer held for it (Evaluator.Preempt's empty nomination).
Most tests register Nodes; the last runs real kubelets with hollow nodes."""

from __future__ import annotations

from skiff.api import get_condition
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.objects import priority_class
from tests.integration.scheduler.conftest import (
    StartKubelet,
    StartScheduler,
    create_node,
    get_pod,
    wait_bound,
    wait_for,
    wait_running,
)
from tests.unit.scheduler.helpers import affinity_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
WEB = {"matchLabels": {"app": "web"}}


def _replica(name: str) -> Obj:
    builder = affinity_pod(name).label("app", "web").pod_anti_affinity(HOST, WEB)
    builder.container("main", image="busybox")
    return builder.obj()


async def _unschedulable_message(api: ApiClient, name: str) -> str:
    async def message() -> str:
        pod = await get_pod(api, name)
        cond = get_condition(pod or {}, "PodScheduled") or {}
        return str(cond.get("message") or "") if cond.get("reason") == "Unschedulable" else ""
    found: str = await wait_for(message, what=f"pod {name} to be reported Unschedulable")
    return found


async def test_required_pod_anti_affinity_spreads_replicas_across_nodes(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    for i in range(3):
        await create_node(api, f"node-{i}")
    start_scheduler()
    for i in range(4):
        await api.create(_replica(f"web-{i}"))
    nodes = {}
    for i in range(4):
        name = f"web-{i}"

        async def bound_or_refused(name: str = name) -> str:
            pod = await get_pod(api, name)
            if pod is not None and pod.get("spec", {}).get("nodeName"):
                return str(pod["spec"]["nodeName"])
            cond = get_condition(pod or {}, "PodScheduled") or {}
            return "-" if cond.get("reason") == "Unschedulable" else ""
        nodes[name] = await wait_for(bound_or_refused, what=f"a decision about {name}")
    placed = {p: n for p, n in nodes.items() if n != "-"}
    waiting = [p for p, n in nodes.items() if n == "-"]
    assert sorted(placed.values()) == ["node-0", "node-1", "node-2"]  # one per node
    assert len(waiting) == 1
    message = await _unschedulable_message(api, waiting[0])
    assert message.startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.")

    # A replica goes away: the waiting one is retried at once and takes its node.
    gone, freed = next(iter(placed.items()))
    await api.delete("pods", gone, "default", grace_period_seconds=0)
    assert await wait_bound(api, waiting[0]) == freed


async def test_required_pod_affinity_waits_for_the_other_app_then_joins_its_zone(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    for i, zone in enumerate(("zone-a", "zone-b", "zone-b")):
        await create_node(api, f"node-{i}", labels={ZONE: zone})
    start_scheduler()
    cache = affinity_pod("cache").label("app", "cache").pod_affinity(
        ZONE, {"matchLabels": {"app": "db"}})
    cache.container("main", image="busybox")
    await api.create(cache.obj())
    message = await _unschedulable_message(api, "cache")
    assert message == ("0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
                       "preemption: 0/3 nodes are available: 3 Preemption is not helpful "
                       "for scheduling.")

    db = affinity_pod("db").label("app", "db").node_selector({HOST: "node-0"})
    db.container("main", image="busybox")
    await api.create(db.obj())
    assert await wait_bound(api, "db") == "node-0"
    assert await wait_bound(api, "cache") == "node-0"  # the only node in zone-a


async def test_stale_nominated_node_is_cleared_and_its_resources_released(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    await api.create(priority_class("high", 1000))
    await create_node(api, "node-1", cpu="2")
    big = affinity_pod("big").priority_class("high")
    big.container("main", image="busybox", requests={"cpu": "3"})  # never fits
    created = await api.create(big.obj())
    created["status"]["nominatedNodeName"] = "node-1"  # left from an earlier preemption
    await api.update_status(created)
    start_scheduler()

    async def cleared() -> Obj | None:
        pod = await get_pod(api, "big")
        cond = get_condition(pod or {}, "PodScheduled") or {}
        if cond.get("reason") == "Unschedulable" and pod is not None and not pod["status"].get(
                "nominatedNodeName"):
            return pod
        return None
    pod = await wait_for(cleared, what="the stale nominatedNodeName to be cleared")
    condition = get_condition(pod, "PodScheduled")
    assert condition is not None and condition["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.")

    # node-1's cpu is no longer held for "big": a lower-priority pod fits there.
    small = affinity_pod("small")
    small.container("main", image="busybox", requests={"cpu": "1"})
    await api.create(small.obj())
    assert await wait_bound(api, "small") == "node-1"


async def test_anti_affinity_replicas_run_on_different_hollow_nodes(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet) -> None:
    """With real kubelets (hollow nodes): three replicas with hostname anti-affinity run,
    one per node, next to other pods their terms do not select."""
    start_kubelet("pool", nodes=3)
    start_scheduler()
    for i in range(2):
        other = affinity_pod(f"other-{i}").label("app", "other")
        other.container("main", command=["sleep", "3600"])
        await api.create(other.obj())
    for i in range(3):
        replica = affinity_pod(f"web-{i}").label("app", "web").pod_anti_affinity(HOST, WEB)
        replica.container("main", command=["sleep", "3600"])
        await api.create(replica.obj())
    nodes = [(await wait_running(api, f"web-{i}"))["spec"]["nodeName"] for i in range(3)]
    assert sorted(nodes) == ["pool-0", "pool-1", "pool-2"]

"""The scheduler against a real apiserver and etcd: spreading (TS1), preemption with
graceful victims (PP4), Never policy (PP5), PDBs, default constraints (TS4) and scheduling
gates (LC9). No kubelet runs here: tests register Nodes and play the kubelet's part of
removing terminated victims."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from skiff.api import get_condition
from skiff.api.testing import DO_NOT_SCHEDULE, PREFER_NO_SCHEDULE, make_pod
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from tests.integration.objects import priority_class
from tests.integration.scheduler.conftest import (
    StartScheduler,
    create_node,
    get_pod,
    wait_bound,
    wait_for,
    wait_unschedulable,
)
from tests.integration.waiting import recorded


def _pod(name: str, *, cpu: str | None = None, labels: dict[str, str] | None = None,
         priority_class_name: str | None = None, grace: int | None = None) -> Any:
    builder = make_pod(name).labels(labels or {})
    builder.container("main", image="busybox",
                      requests={"cpu": cpu} if cpu is not None else None)
    if priority_class_name:
        builder.priority_class(priority_class_name)
    if grace is not None:
        builder.termination_grace_period(grace)
    return builder


async def test_ts1_pods_spread_evenly_across_zones(api: ApiClient,
                                                   start_scheduler: StartScheduler) -> None:
    for i, zone in enumerate(("zone-a", "zone-a", "zone-b", "zone-b", "zone-c")):
        await create_node(api, f"node-{i}", labels={"topology.kubernetes.io/zone": zone})
    start_scheduler()
    selector = {"matchLabels": {"app": "web"}}
    for i in range(6):
        await api.create(_pod(f"web-{i}", labels={"app": "web"})
                         .spread(1, "topology.kubernetes.io/zone", DO_NOT_SCHEDULE, selector)
                         .obj())
    zones: dict[str, int] = {}
    zone_of = {f"node-{i}": z for i, z in enumerate(("zone-a", "zone-a", "zone-b", "zone-b",
                                                     "zone-c"))}
    for i in range(6):
        node = await wait_bound(api, f"web-{i}")
        zones[zone_of[node]] = zones.get(zone_of[node], 0) + 1
    assert zones == {"zone-a": 2, "zone-b": 2, "zone-c": 2}
    pod = await get_pod(api, "web-0")
    assert pod is not None
    assert (get_condition(pod, "PodScheduled") or {}).get("status") == "True"
    scheduled = await recorded(api, "default", reason="Scheduled", name="web-0")
    assert scheduled[0]["message"] == (
        f"Successfully assigned default/web-0 to {pod['spec']['nodeName']}")


async def test_pp4_high_priority_pod_preempts_on_a_full_cluster(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("high", 1000))
    await create_node(api, "node-1", cpu="2")
    start_scheduler()
    for name in ("low-1", "low-2"):
        await api.create(_pod(name, cpu="1", priority_class_name="low", grace=30).obj())
        assert await wait_bound(api, name) == "node-1"
    await api.create(_pod("high", cpu="1", priority_class_name="high").obj())

    async def nominated() -> Obj | None:
        pod = await get_pod(api, "high")
        return pod if (pod or {}).get("status", {}).get("nominatedNodeName") else None
    high = await wait_for(nominated, what="nominatedNodeName")
    assert high["status"]["nominatedNodeName"] == "node-1"
    assert not high["spec"].get("nodeName")

    async def victims() -> list[Obj]:
        pods = [await get_pod(api, n) for n in ("low-1", "low-2")]
        return [p for p in pods if p and p["metadata"].get("deletionTimestamp")]
    marked = await wait_for(victims, what="a victim to be terminating")
    assert len(marked) == 1  # one pod's cpu is enough: a minimal set
    victim = marked[0]
    meta = victim["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30  # its full grace period
    assert parse_rfc3339(meta["deletionTimestamp"]) > time.time() + 25
    disruption = get_condition(victim, "DisruptionTarget")
    assert disruption is not None and disruption["reason"] == "PreemptionByScheduler"
    preempted = await recorded(api, "default", reason="Preempted", name=meta["name"])
    assert preempted[0]["message"] == (
        f"Preempted by pod {high['metadata']['uid']} on node node-1")
    scheduled = get_condition(high, "PodScheduled")
    assert scheduled is not None and scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == "0/1 nodes are available: 1 Insufficient cpu."

    # While the victim terminates the preemptor waits (and preempts nobody else).
    await asyncio.sleep(1.5)
    high = await get_pod(api, "high")
    assert high is not None and not high["spec"].get("nodeName")
    others = [p for p in [await get_pod(api, n) for n in ("low-1", "low-2")]
              if p and p["metadata"]["name"] != meta["name"]]
    assert others and not others[0]["metadata"].get("deletionTimestamp")

    # The kubelet's part: the victim's processes are gone, remove the object.
    await api.delete("pods", meta["name"], "default", grace_period_seconds=0)
    assert await wait_bound(api, "high") == "node-1"


async def test_pp5_never_policy_pod_waits_instead_of_preempting(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("polite", 1000, policy="Never"))
    await create_node(api, "node-1", cpu="1")
    start_scheduler()
    await api.create(_pod("low", cpu="1", priority_class_name="low").obj())
    await wait_bound(api, "low")
    await api.create(_pod("polite", cpu="1", priority_class_name="polite").obj())

    assert await wait_unschedulable(api, "polite", what="Unschedulable condition") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.")
    failed = await recorded(api, "default", reason="FailedScheduling", name="polite")
    assert failed[0]["type"] == "Warning"
    await asyncio.sleep(1.0)
    low = await get_pod(api, "low")
    assert low is not None and not low["metadata"].get("deletionTimestamp")
    polite = await get_pod(api, "polite")  # as it is now, after the scheduler had its chance
    assert polite is not None and not polite["spec"].get("nodeName")
    assert not (polite.get("status") or {}).get("nominatedNodeName")
    # Resources freed "naturally": it is scheduled on the next retry.
    await api.delete("pods", "low", "default", grace_period_seconds=0)
    assert await wait_bound(api, "polite") == "node-1"


async def test_pp4_pdb_is_respected_when_another_candidate_exists(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("high", 1000))
    await create_node(api, "node-1", cpu="1", labels={"rank": "a"})
    await create_node(api, "node-2", cpu="1", labels={"rank": "b"})
    await api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": "db", "namespace": "default"},
                      "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    pdb = await api.get("poddisruptionbudgets", "db", "default")
    # The disruption controller's part: one healthy pod, none may go.
    pdb["status"] = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                     "expectedPods": 1, "observedGeneration": 1}
    await api.update_status(pdb)
    start_scheduler()
    db = _pod("db", cpu="1", labels={"app": "db"}, priority_class_name="low").obj()
    db["spec"]["nodeSelector"] = {"rank": "a"}
    web = _pod("web", cpu="1", priority_class_name="low").obj()
    web["spec"]["nodeSelector"] = {"rank": "b"}
    await api.create(db)
    await api.create(web)
    await wait_bound(api, "db")
    await wait_bound(api, "web")
    await api.create(_pod("high", cpu="1", priority_class_name="high").obj())

    async def nominated() -> str:
        pod = await get_pod(api, "high")
        return str((pod or {}).get("status", {}).get("nominatedNodeName") or "")
    assert await wait_for(nominated, what="nomination") == "node-2"
    web_pod = await get_pod(api, "web")
    db_pod = await get_pod(api, "db")
    assert web_pod is not None and web_pod["metadata"].get("deletionTimestamp")
    assert db_pod is not None and not db_pod["metadata"].get("deletionTimestamp")


DEFAULT_CONSTRAINTS = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
"""


async def test_ts4_default_constraints_apply_to_an_owned_pod_only(
        api: ApiClient, start_scheduler: StartScheduler) -> None:
    zone = "topology.kubernetes.io/zone"
    await create_node(api, "node-1", labels={zone: "zone-1"})
    # zone-2's node is less attractive to every pod (PreferNoSchedule, TaintToleration ×3)
    await create_node(api, "node-2", labels={zone: "zone-2"},
                      taints=[("spot", PREFER_NO_SCHEDULE)])
    rs = await api.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    for i in range(2):
        await api.create(_pod(f"existing-{i}", labels={"app": "web"}).node("node-1").obj())
    start_scheduler(config=DEFAULT_CONSTRAINTS)
    await api.create(_pod("unowned", labels={"app": "web"}).obj())
    assert await wait_bound(api, "unowned") == "node-1"
    await api.create(_pod("owned", labels={"app": "web"})
                     .owner("ReplicaSet", "web", uid=rs["metadata"]["uid"]).obj())
    assert await wait_bound(api, "owned") == "node-2"


async def test_lc9_scheduling_gates_hold_a_pod(api: ApiClient,
                                               start_scheduler: StartScheduler) -> None:
    await create_node(api, "node-1")
    start_scheduler()
    await api.create(_pod("gated").scheduling_gate("example.com/quota").obj())

    async def gated() -> Obj | None:
        pod = await get_pod(api, "gated")
        cond = get_condition(pod or {}, "PodScheduled")
        return pod if cond and cond.get("reason") == "SchedulingGated" else None
    pod = await wait_for(gated, what="SchedulingGated condition")
    await asyncio.sleep(1.0)
    pod = await get_pod(api, "gated")
    assert pod is not None and not pod["spec"].get("nodeName")
    pod["spec"]["schedulingGates"] = []
    await api.update(pod)
    assert await wait_bound(api, "gated") == "node-1"

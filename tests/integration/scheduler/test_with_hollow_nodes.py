"""The scheduler with real kubelets: every node here is a hollow node of a real kubelet
process (`--runtime fake`), so pods really start, victims really terminate and the kubelet,
not the test, removes their objects (GT10). Spreading (TS1), preemption of gracefully
terminating victims (PP4), a Never-policy pod waiting (PP5), a PDB kept by the real
disruption controller (PP4) and default constraints for a ReplicaSet's pod only (TS4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from skiff.api import get_condition
from skiff.api.testing import DO_NOT_SCHEDULE, make_pod
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.objects import pdb, priority_class
from tests.integration.scheduler.conftest import (
    StartControllerManager,
    StartKubelet,
    StartScheduler,
    get_pod,
    wait_for,
    wait_gone,
    wait_running,
    wait_unschedulable,
)
from tests.integration.waiting import recorded

ZONE = "topology.kubernetes.io/zone"


def _pod(name: str, *, cpu: str | None = None, labels: dict[str, str] | None = None,
         priority_class_name: str | None = None, grace: int | None = None) -> Any:
    """A pod whose hollow container runs until it is signalled."""
    builder = make_pod(name).labels(labels or {})
    builder.container("main", command=["sleep", "3600"],
                      requests={"cpu": cpu} if cpu is not None else None)
    if priority_class_name:
        builder.priority_class(priority_class_name)
    if grace is not None:
        builder.termination_grace_period(grace)
    return builder


@dataclass
class PodHistory:
    """Every pod watch event in order, so short-lived states (a victim's deletion mark,
    its removal) are seen even when the kubelet is faster than polling."""

    events: list[tuple[str, Obj]] = field(default_factory=list)

    def first(self, name: str, *, kind: str = "", with_deletion: bool = False,
              bound: bool = False) -> int | None:
        for i, (type_, obj) in enumerate(self.events):
            if obj["metadata"]["name"] != name or (kind and type_ != kind):
                continue
            if with_deletion and not obj["metadata"].get("deletionTimestamp"):
                continue
            if bound and not obj["spec"].get("nodeName"):
                continue
            return i
        return None


@contextlib.asynccontextmanager
async def pod_history(api: ApiClient) -> AsyncIterator[PodHistory]:
    history = PodHistory()
    rv = (await api.list("pods", "default"))["metadata"]["resourceVersion"]

    async def record() -> None:
        async for ev in api.watch("pods", "default", resource_version=rv,
                                  allow_bookmarks=False):
            history.events.append((ev.type, ev.object))

    task = asyncio.create_task(record(), name="pod-history")
    try:
        yield history
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_ts1_pods_spread_across_zones_on_hollow_nodes(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet) -> None:
    for zone in ("zone-a", "zone-b", "zone-c"):
        start_kubelet(zone, nodes=2, labels={ZONE: zone})
    start_scheduler()
    selector = {"matchLabels": {"app": "web"}}
    for i in range(6):
        await api.create(_pod(f"web-{i}", labels={"app": "web"})
                         .spread(1, ZONE, DO_NOT_SCHEDULE, selector).obj())
    zones: dict[str, int] = {}
    for i in range(6):
        pod = await wait_running(api, f"web-{i}")
        node = await api.get("nodes", pod["spec"]["nodeName"])
        zone = node["metadata"]["labels"][ZONE]
        zones[zone] = zones.get(zone, 0) + 1
    assert zones == {"zone-a": 2, "zone-b": 2, "zone-c": 2}


async def test_pp4_high_priority_pod_preempts_on_a_full_hollow_cluster(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("high", 1000))
    start_kubelet("full", nodes=2, cpu="2")
    start_scheduler()
    lows = [f"low-{i}" for i in range(4)]
    for name in lows:
        await api.create(_pod(name, cpu="1", priority_class_name="low", grace=2).obj())
    for name in lows:
        await wait_running(api, name)

    async with pod_history(api) as history:
        await api.create(_pod("high", cpu="1", priority_class_name="high").obj())
        high = await wait_running(api, "high", timeout=30)
        await asyncio.sleep(0.5)  # let the watch catch up with the apiserver
    node = high["spec"]["nodeName"]
    assert high["status"]["nominatedNodeName"] == node

    marked = [name for name in lows if history.first(name, with_deletion=True) is not None]
    assert len(marked) == 1, marked  # one pod's cpu is enough: a minimal set
    victim = marked[0]
    mark = history.first(victim, with_deletion=True)
    assert mark is not None
    victim_obj = history.events[mark][1]
    assert victim_obj["spec"]["nodeName"] == node  # never across nodes
    assert victim_obj["metadata"]["deletionGracePeriodSeconds"] == 2  # its full grace
    disruption = get_condition(victim_obj, "DisruptionTarget")
    assert disruption is not None and disruption["reason"] == "PreemptionByScheduler"
    preempted = await recorded(api, "default", reason="Preempted", name=victim)
    assert preempted[0]["message"] == (
        f"Preempted by pod {high['metadata']['uid']} on node {node}")

    # The hollow kubelet terminated the victim and removed it; only then was the
    # preemptor bound to the node it had been nominated to.
    removed = history.first(victim, kind="DELETED")
    bound = history.first("high", bound=True)
    assert removed is not None and bound is not None and removed < bound
    assert await get_pod(api, victim) is None
    for name in lows:
        if name != victim:
            pod = await get_pod(api, name)
            assert pod is not None and not pod["metadata"].get("deletionTimestamp")


async def test_pp5_never_policy_pod_waits_on_hollow_nodes(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("polite", 1000, policy="Never"))
    start_kubelet("small", nodes=1, cpu="1")
    start_scheduler()
    await api.create(_pod("low", cpu="1", priority_class_name="low", grace=2).obj())
    await wait_running(api, "low")
    await api.create(_pod("polite", cpu="1", priority_class_name="polite").obj())

    assert await wait_unschedulable(api, "polite", what="the Unschedulable condition") == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.")
    await asyncio.sleep(1.5)  # several backoff retries (0.2 s → 1 s) later: still waiting
    low = await get_pod(api, "low")
    assert low is not None and not low["metadata"].get("deletionTimestamp")
    assert low["status"]["phase"] == "Running"
    pod = await get_pod(api, "polite")
    assert pod is not None and not pod["spec"].get("nodeName")
    assert not pod["status"].get("nominatedNodeName")

    # The cpu is freed by an ordinary delete; the kubelet removes the pod, polite runs.
    await api.delete("pods", "low", "default")
    await wait_gone(api, "low")
    assert (await wait_running(api, "polite"))["spec"]["nodeName"] == "small-0"


async def test_pp4_pdb_respected_when_another_candidate_exists(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet,
        start_controller_manager: StartControllerManager) -> None:
    await api.create(priority_class("low", 10))
    await api.create(priority_class("high", 1000))
    start_kubelet("rank-a", nodes=1, cpu="1", labels={"rank": "a"})
    start_kubelet("rank-b", nodes=1, cpu="1", labels={"rank": "b"})
    start_controller_manager("disruption")
    start_scheduler()
    await api.create(pdb("db", "default", {"app": "db"}, min_available=1))
    web = _pod("web", cpu="1", priority_class_name="low", grace=2).obj()
    web["spec"]["nodeSelector"] = {"rank": "b"}
    await api.create(web)
    await wait_running(api, "web")
    # db starts later than web, so without its PDB db's node would be the better
    # candidate (latest start time of the highest-priority victim).
    await asyncio.sleep(1.1)
    db = _pod("db", cpu="1", labels={"app": "db"}, priority_class_name="low", grace=2).obj()
    db["spec"]["nodeSelector"] = {"rank": "a"}
    await api.create(db)
    await wait_running(api, "db")

    async def pdb_observed() -> Obj | None:
        obj = await api.get("poddisruptionbudgets", "db", "default")
        status = obj.get("status") or {}
        return obj if status.get("currentHealthy") == 1 else None
    budget = await wait_for(pdb_observed, what="the disruption controller's PDB status")
    assert budget["status"]["disruptionsAllowed"] == 0

    await api.create(_pod("high", cpu="1", priority_class_name="high").obj())
    high = await wait_running(api, "high", timeout=30)
    assert high["spec"]["nodeName"] == "rank-b-0"
    assert high["status"]["nominatedNodeName"] == "rank-b-0"
    assert await get_pod(api, "web") is None
    db_pod = await get_pod(api, "db")
    assert db_pod is not None and not db_pod["metadata"].get("deletionTimestamp")


DEFAULT_CONSTRAINTS = f"""
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
        topologyKey: {ZONE}
        whenUnsatisfiable: DoNotSchedule
"""


async def test_ts4_default_constraints_apply_to_an_owned_pod_only(
        api: ApiClient, start_scheduler: StartScheduler, start_kubelet: StartKubelet,
        start_controller_manager: StartControllerManager) -> None:
    start_kubelet("zone-1", nodes=1, labels={ZONE: "zone-1"})
    start_controller_manager("replicaset")
    start_scheduler(config=DEFAULT_CONSTRAINTS)
    selector = {"app": "web", "tier": "front"}
    rs = await api.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": selector}, "spec": {"containers": [
                     {"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}}})

    async def replicas(n: int) -> list[Obj]:
        async def running() -> list[Obj]:
            pods = (await api.list("pods", "default", label_selector="app=web,tier=front")
                    )["items"]
            ready = [p for p in pods if p["status"].get("phase") == "Running"]
            return ready if len(ready) == n else []
        found: list[Obj] = await wait_for(running, what=f"{n} running replicas")
        return found
    first = await replicas(2)
    assert {p["spec"]["nodeName"] for p in first} == {"zone-1-0"}

    # zone-2's node is less attractive to every pod (PreferNoSchedule, TaintToleration ×3).
    start_kubelet("zone-2", nodes=1, labels={ZONE: "zone-2"}, taints="spot=:PreferNoSchedule")
    await api.create(_pod("unowned", labels={"app": "web"}).obj())
    assert (await wait_running(api, "unowned"))["spec"]["nodeName"] == "zone-1-0"

    rs = await api.get("replicasets", "web", "default")
    rs["spec"]["replicas"] = 3
    await api.update(rs)
    third = [p for p in await replicas(3) if p["metadata"]["name"] not in
             {q["metadata"]["name"] for q in first}]
    assert len(third) == 1
    owner = third[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("ReplicaSet", "web")
    assert third[0]["spec"]["nodeName"] == "zone-2-0"

"""SPEC PS4 with real processes: a StatefulSet and a ReplicaSet of size 1 on a node whose
kubelet went silent. The StatefulSet keeps at most one pod per identity; the ReplicaSet
prefers availability. There is no scheduler: the tests bind pods as a kubelet double."""

from __future__ import annotations

import asyncio

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import (
    KubeletDouble,
    events,
    get_or_none,
    recorded,
    wait_for,
)
from tests.integration.controller_manager.workloads import replica_set, stateful_set


async def _pods(api: ApiClient, namespace: str, app: str) -> list[Obj]:
    items: list[Obj] = (await api.list("pods", namespace, label_selector=f"app={app}"))["items"]
    return items


async def test_ps4_statefulset_waits_for_the_old_pod_to_be_gone_before_replacing_it(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager()
    async with KubeletDouble(api, f"a-{namespace}") as away, \
            KubeletDouble(api, f"b-{namespace}") as other:
        await api.create(stateful_set("web", namespace, replicas=1, unreachable_toleration=1))
        first = await wait_for(lambda: get_or_none(api, "pods", "web-0", namespace),
                               timeout=10, what="web-0 to be created")
        assert first["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-0"
        assert first["spec"]["hostname"] == "web-0" and first["spec"]["subdomain"] == "web"
        ref = first["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("StatefulSet", "web", True)
        await away.run_pod(namespace, "web-0")

        await away.cut()

        async def terminating() -> Obj | None:
            p = await get_or_none(api, "pods", "web-0", namespace)
            return p if p and p["metadata"].get("deletionTimestamp") else None

        old = await wait_for(terminating, timeout=15, what="web-0 to be evicted")
        # At most one: while the old object exists, no second web-0 and no other pod.
        await asyncio.sleep(3)
        pods = await _pods(api, namespace, "web")
        assert [p["metadata"]["uid"] for p in pods] == [old["metadata"]["uid"]]
        assert len(await events(api, namespace, reason="SuccessfulCreate")) == 1

        # Deleting the Node says it is gone for good: PodGC force deletes, web-0 comes back.
        await api.delete("nodes", away.name)

        async def recreated() -> Obj | None:
            p = await get_or_none(api, "pods", "web-0", namespace)
            return p if p and p["metadata"]["uid"] != old["metadata"]["uid"] else None

        new = await wait_for(recreated, timeout=15, what="web-0 to be recreated")
        assert not new["spec"].get("nodeName")
        gc_events = await recorded(api, namespace, reason="DeletionByPodGC", name="web-0")
        assert [e["involvedObject"]["uid"] for e in gc_events] == [old["metadata"]["uid"]]
        await other.run_pod(namespace, "web-0")

        async def ready_status() -> bool:
            sts = await api.get("statefulsets", "web", namespace)
            return (sts.get("status") or {}).get("readyReplicas") == 1

        await wait_for(ready_status, timeout=5, what="status.readyReplicas to be 1")


async def test_ps4_replicaset_replaces_a_pod_as_soon_as_it_starts_terminating(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager()
    async with KubeletDouble(api, f"a-{namespace}") as away, \
            KubeletDouble(api, f"b-{namespace}") as other:
        await api.create(replica_set("front", namespace, replicas=1,
                                     unreachable_toleration=1))

        async def one_pod() -> list[Obj] | None:
            pods = await _pods(api, namespace, "front")
            return pods if len(pods) == 1 else None

        [first] = await wait_for(one_pod, timeout=10, what="the ReplicaSet's pod")
        old_name = str(first["metadata"]["name"])
        assert old_name.startswith("front-")
        await away.run_pod(namespace, old_name)
        await away.cut()

        async def replacement() -> Obj | None:
            pods = await _pods(api, namespace, "front")
            return next((p for p in pods if p["metadata"]["name"] != old_name), None)

        new = await wait_for(replacement, timeout=15, what="a replacement pod")
        new_name = str(new["metadata"]["name"])
        await other.run_pod(namespace, new_name)
        old = await api.get("pods", old_name, namespace)
        running = await api.get("pods", new_name, namespace)
        assert old["metadata"].get("deletionTimestamp"), "the old pod is still Terminating"
        assert running["status"]["phase"] == "Running"
        async def two_creates() -> bool:  # the second Event is written just after its pod
            return len(await events(api, namespace, reason="SuccessfulCreate")) == 2

        await wait_for(two_creates, timeout=10, what="exactly two SuccessfulCreate Events")

        async def status_counts() -> bool:
            rs = await api.get("replicasets", "front", namespace)
            status = rs.get("status") or {}
            return (status.get("replicas"), status.get("readyReplicas"),
                    status.get("terminatingReplicas")) == (1, 1, 1)

        await wait_for(status_counts, timeout=5, what="ReplicaSet status 1 ready, 1 terminating")

"""SPEC FN1 and FN3 with real etcd, apiserver and controller-manager processes: the test
plays the kubelet (KubeletDouble; a cut node stops renewing its Lease) and the fence agent
(it moves the Fence's status through the API). Time is compressed: NodeReady goes Unknown
2 s after the last renewal and the fencing delay is 2 s."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import (
    StartControllerManager,
    start_controller_manager,
)
from tests.integration.controller_manager.fencing_helpers import (
    FENCING,
    agent_releases,
    agent_sets_phase,
    annotate_node,
    has_taint,
    remove_fence,
    wait_for_fence,
    watching_pods,
)
from tests.integration.controller_manager.kubelet_double import (
    KubeletDouble,
    events,
    get_or_none,
    recorded,
    wait_for,
)
from tests.integration.controller_manager.workloads import stateful_set

TAINT_FENCED = "skiff.io/fenced"


@pytest.fixture
async def fences(api: ApiClient) -> AsyncIterator[list[str]]:
    """Names of Fences the test may create; they are unfenced and removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        await remove_fence(api, name)


async def _ready_status(api: ApiClient, node: str) -> str:
    obj = await api.get("nodes", node)
    ready: Obj = next((c for c in obj["status"].get("conditions", []) if c["type"] == "Ready"),
                      {})
    return str(ready.get("status"))


async def _web_0_on(api: ApiClient, namespace: str, node: KubeletDouble) -> Obj:
    await api.create(stateful_set("web", namespace, replicas=1))
    await wait_for(lambda: get_or_none(api, "pods", "web-0", namespace), timeout=10,
                   what="web-0 to be created")
    return await node.run_pod(namespace, "web-0")


async def _recreated(api: ApiClient, namespace: str, old_uid: str) -> Obj:
    async def check() -> Obj | None:
        pod = await get_or_none(api, "pods", "web-0", namespace)
        return pod if pod and pod["metadata"]["uid"] != old_uid else None

    result: Obj = await wait_for(check, timeout=15, what="web-0 to be recreated")
    return result


async def test_fn1_partitioned_node_with_statefulset_pod_gets_fenced_after_the_delay(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        fences: list[str]) -> None:
    name = f"cm-{uuid.uuid4().hex[:6]}"
    controller_manager(*FENCING, name=name)
    async with KubeletDouble(api, f"a-{namespace}") as away:
        fences.append(away.name)
        await annotate_node(api, away.name, agent="power")
        await _web_0_on(api, namespace, away)
        await away.cut()

        await wait_for(lambda: _unknown(api, away.name), timeout=20, what="NodeReady Unknown")
        # "Not before the delay" is checked on the recorded times below, not by racing it.
        fence = await wait_for_fence(api, away.name)

        node = await api.get("nodes", away.name)
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        waited = (parse_rfc3339(fence["metadata"]["creationTimestamp"])
                  - parse_rfc3339(ready["lastTransitionTime"]))
        assert waited >= 1, f"fenced {waited}s after NodeReady went Unknown (delay 2s)"
        assert fence["spec"]["nodeName"] == away.name
        assert fence["spec"]["agent"] == "power"
        assert fence["spec"]["reason"].startswith("NodeReady Unknown since ")
        assert fence["spec"]["reason"].endswith("(partitioned)")
        assert fence["spec"]["requestedBy"] == f"controller-manager/{name}"
        assert fence["metadata"]["finalizers"] == ["skiff.io/fence-agent"]
        assert fence["status"]["phase"] == "Pending"
        [requested] = await recorded(api, "default", reason="FencingRequested", name=away.name)
        assert f"{namespace}/web-0" in requested["message"]
        # Requested, not confirmed: nothing is deleted and the node is not cordoned.
        await asyncio.sleep(1)
        pod = await api.get("pods", "web-0", namespace)
        assert pod["status"]["phase"] == "Running", "web-0 is left alone until confirmed"
        assert not (await api.get("nodes", away.name))["spec"].get("unschedulable")


async def _unknown(api: ApiClient, node: str) -> bool:
    return await _ready_status(api, node) == "Unknown"


async def test_fn3_pods_are_force_deleted_only_after_the_fence_is_confirmed(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        fences: list[str]) -> None:
    controller_manager(*FENCING)
    async with KubeletDouble(api, f"a-{namespace}") as away, \
            KubeletDouble(api, f"b-{namespace}") as other:
        fences.append(away.name)
        await annotate_node(api, away.name, agent="power")
        old = await _web_0_on(api, namespace, away)
        old_uid = old["metadata"]["uid"]
        await away.cut()
        await wait_for_fence(api, away.name)

        for phase in ("Pending", "Fencing"):
            if phase == "Fencing":
                await agent_sets_phase(api, away.name, "Fencing")
            await asyncio.sleep(1.5)
            pod = await api.get("pods", "web-0", namespace)
            assert pod["metadata"]["uid"] == old_uid, f"web-0 deleted while {phase}"
            assert not any(c["type"] == "DisruptionTarget"
                           for c in pod["status"].get("conditions", []))
            assert not await events(api, namespace, reason="PodForceDeletedAfterFencing")

        async with watching_pods(api, namespace) as seen:
            await agent_sets_phase(api, away.name, "Fenced")
            new = await _recreated(api, namespace, old_uid)

            async def watch_caught_up() -> bool:
                # The reads above can be ahead of the watch under load; etcd's order puts
                # the replacement's creation after every write of the old pod.
                return any(v["object"]["metadata"]["uid"] == new["metadata"]["uid"]
                           for v in seen)

            await wait_for(watch_caught_up, timeout=15, what="the watch to see the new pod")
        assert not new["spec"].get("nodeName"), "the replacement is a fresh, unbound pod"

        # The old pod got DisruptionTarget (DeletionByFencing) before the grace-0 delete.
        old_versions = [v for v in seen if v["object"]["metadata"]["uid"] == old_uid]
        assert [v["type"] for v in old_versions][-2:] == ["MODIFIED", "DELETED"]
        last = old_versions[-2]["object"]
        target = next(c for c in last["status"]["conditions"]
                      if c["type"] == "DisruptionTarget")
        assert target["reason"] == "DeletionByFencing"
        assert away.name in target["message"] and "power" in target["message"]
        deleted = await recorded(api, namespace, reason="PodForceDeletedAfterFencing")
        assert [e["involvedObject"]["uid"] for e in deleted] == [old_uid]
        assert await recorded(api, "default", reason="FencingConfirmed", name=away.name)

        async def pods_deleted() -> bool:
            fence = await api.get("fences", away.name)
            return bool(fence["status"].get("podsDeleted") == 1)

        await wait_for(pods_deleted, timeout=5, what="Fence status.podsDeleted = 1")
        node = await api.get("nodes", away.name)
        assert node["spec"]["unschedulable"] is True and has_taint(node, TAINT_FENCED)
        await other.run_pod(namespace, "web-0")
        created = await events(api, namespace, reason="SuccessfulCreate")
        assert sum(int(e.get("count", 1)) for e in created) == 2


async def test_fn1_node_with_fence_agent_none_or_no_opted_in_pods_is_not_fenced(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        fences: list[str]) -> None:
    controller_manager(*FENCING)
    async with KubeletDouble(api, f"none-{namespace}") as no_agent, \
            KubeletDouble(api, f"plain-{namespace}") as plain, \
            KubeletDouble(api, f"in-{namespace}") as opted:
        fences.extend([no_agent.name, plain.name, opted.name])
        await annotate_node(api, no_agent.name, agent="none")
        await annotate_node(api, plain.name, agent="power")
        await annotate_node(api, opted.name, agent="power")
        await _web_0_on(api, namespace, no_agent)  # opts in, but the node has no agent
        for pod_name, node, annotations in (
                ("plain", plain, {}),  # a bare pod does not opt in
                ("opted-out", plain, {"skiff.io/fencing": "false"}),
                ("opted-in", opted, {"skiff.io/fencing": "true"})):  # the control
            await api.create({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": pod_name, "namespace": namespace,
                                           "annotations": annotations},
                              "spec": {"containers": [{"name": "m", "image": "busybox"}]}})
            await node.run_pod(namespace, pod_name)
        for node in (no_agent, plain, opted):
            await node.cut()

        await wait_for_fence(api, opted.name)  # the controller is working and in time
        await asyncio.sleep(1.5)
        for node in (no_agent, plain):
            assert await _unknown(api, node.name)
            assert await get_or_none(api, "fences", node.name) is None, node.name
        assert not await events(api, "default", reason="FencingRequested", name=no_agent.name)


async def test_fn3_fenced_node_stays_cordoned_when_it_returns_until_unfenced(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        fences: list[str]) -> None:
    controller_manager(*FENCING)
    async with KubeletDouble(api, f"a-{namespace}") as away:
        fences.append(away.name)
        await annotate_node(api, away.name, agent="power")
        old = await _web_0_on(api, namespace, away)
        await away.cut()
        await wait_for_fence(api, away.name)
        await agent_sets_phase(api, away.name, "Fencing")
        await agent_sets_phase(api, away.name, "Fenced")
        await _recreated(api, namespace, old["metadata"]["uid"])

        # The node comes back (e.g. the partition heals): it stays cordoned.
        away.resume()
        await away.report_ready()

        async def ready_without_lifecycle_taints() -> bool:
            node = await api.get("nodes", away.name)
            return (await _ready_status(api, away.name) == "True"
                    and not has_taint(node, "node.kubernetes.io/unreachable"))

        await wait_for(ready_without_lifecycle_taints, timeout=10, what="the node back Ready")
        await asyncio.sleep(1)
        node = await api.get("nodes", away.name)
        assert node["spec"]["unschedulable"] is True and has_taint(node, TAINT_FENCED)

        # Unfencing is explicit: delete the Fence. While the agent holds its finalizer the
        # Fence is terminating and the cordon stays.
        await api.delete("fences", away.name)
        await asyncio.sleep(1)
        fence = await api.get("fences", away.name)
        assert fence["metadata"].get("deletionTimestamp")
        node = await api.get("nodes", away.name)
        assert node["spec"]["unschedulable"] is True and has_taint(node, TAINT_FENCED)

        await agent_releases(api, away.name)

        async def uncordoned() -> bool:
            node = await api.get("nodes", away.name)
            return not node["spec"].get("unschedulable") and not has_taint(node, TAINT_FENCED)

        await wait_for(uncordoned, timeout=10, what="the cordon to be lifted")
        assert await get_or_none(api, "fences", away.name) is None
        assert await recorded(api, "default", reason="NodeUnfenced", name=away.name)


async def test_fn1_failed_fence_is_retried_after_the_backoff(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        fences: list[str]) -> None:
    controller_manager(*FENCING)
    async with KubeletDouble(api, f"a-{namespace}") as away:
        fences.append(away.name)
        await annotate_node(api, away.name, agent="power")
        old = await _web_0_on(api, namespace, away)
        await away.cut()
        first = await wait_for_fence(api, away.name)
        await agent_sets_phase(api, away.name, "Failed", "BMC did not answer")
        # The controller deletes the Failed Fence; the agent lets go of it; a new one comes.
        await wait_for(lambda: _terminating(api, away.name), timeout=10,
                       what="the failed Fence to be deleted")
        assert (await api.get("pods", "web-0", namespace))["metadata"]["uid"] == \
            old["metadata"]["uid"], "a failed fence deletes nothing"
        await agent_releases(api, away.name)

        async def second() -> Obj | None:
            fence = await get_or_none(api, "fences", away.name)
            return fence if fence and fence["metadata"]["uid"] != first["metadata"]["uid"] \
                else None

        await wait_for(second, timeout=10, what="a new Fence")
        [failed] = await events(api, "default", reason="FencingFailed", name=away.name)
        assert "BMC did not answer" in failed["message"]


async def _terminating(api: ApiClient, name: str) -> bool:
    fence = await get_or_none(api, "fences", name)
    return bool(fence and fence["metadata"].get("deletionTimestamp"))


async def test_fencing_is_idempotent_across_a_controller_manager_restart_mid_fence(
        api: ApiClient, namespace: str, shared_cluster: Cluster, fences: list[str]) -> None:
    lease = f"cm-{uuid.uuid4().hex[:8]}"
    started: list[Process] = []
    try:
        first = start_controller_manager(shared_cluster, started, *FENCING, lease=lease,
                                         name=f"{lease}-a")
        async with KubeletDouble(api, f"a-{namespace}") as away, \
                KubeletDouble(api, f"b-{namespace}"):
            fences.append(away.name)
            await annotate_node(api, away.name, agent="power")
            old = await _web_0_on(api, namespace, away)
            old_uid = old["metadata"]["uid"]
            await away.cut()
            fence = await wait_for_fence(api, away.name)
            await agent_sets_phase(api, away.name, "Fencing")

            first.kill()  # SIGKILL mid-fence: no lease release, no cleanup
            start_controller_manager(shared_cluster, started, *FENCING, lease=lease,
                                     name=f"{lease}-b")
            await agent_sets_phase(api, away.name, "Fenced")
            await _recreated(api, namespace, old_uid)

            async def settled() -> bool:
                fence = await api.get("fences", away.name)
                return bool(fence["status"].get("podsDeleted") == 1)

            await wait_for(settled, timeout=10, what="Fence status.podsDeleted = 1")
            await asyncio.sleep(1)
            # One Fence, created once, by the first controller-manager.
            history = await api.history("fences", away.name)
            assert [v["type"] for v in history].count("ADDED") == 1
            now = await api.get("fences", away.name)
            assert now["metadata"]["uid"] == fence["metadata"]["uid"]
            assert now["spec"]["requestedBy"] == f"controller-manager/{lease}-a"
            requested = await events(api, "default", reason="FencingRequested",
                                     name=away.name)
            assert sum(int(e.get("count", 1)) for e in requested) == 1
            # Each pod deleted once; the identity recreated once.
            deleted = await recorded(api, namespace, reason="PodForceDeletedAfterFencing")
            assert [(e["involvedObject"]["uid"], e.get("count", 1)) for e in deleted] == [
                (old_uid, 1)]
            created = await events(api, namespace, reason="SuccessfulCreate")
            assert sum(int(e.get("count", 1)) for e in created) == 2
    finally:
        for proc in started:
            proc.stop()
            shared_cluster.services.pop(proc.name, None)

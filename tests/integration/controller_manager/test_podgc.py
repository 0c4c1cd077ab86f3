"""SPEC PS3 with real processes: each PodGC rule on its own, with compressed periods.

The controller-manager runs only PodGC here, so nothing else touches the pods.
"""

from __future__ import annotations

import asyncio
import time

from skiff.api import get_condition, is_pod_terminal
from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import (
    StartControllerManager,
    start_controller_manager,
)
from tests.integration.controller_manager.kubelet_double import (
    get_or_none,
    recorded,
    wait_for,
)
from tests.integration.objects import pod


async def _marked_failed_before_deletion(api: ApiClient, name: str, namespace: str, *,
                                        disruption_target: bool) -> bool:
    """AS6 history: a version with phase Failed preceded the deletion, with a
    DisruptionTarget condition (reason DeletionByPodGC) only for an orphaned pod, as in
    Kubernetes 1.32."""
    versions = await api.history("pods", name, namespace)
    assert versions[-1]["type"] == "DELETED"
    failed = [v["object"] for v in versions[:-1]
              if v["object"] and v["object"]["status"].get("phase") == "Failed"]
    marked = [(get_condition(p, "DisruptionTarget") or {}).get("reason") == "DeletionByPodGC"
              for p in failed]
    return bool(failed) and (any(marked) if disruption_target else not any(marked))


async def test_ps3_terminated_pods_over_the_threshold_go_oldest_first(
        fresh_cluster: Cluster) -> None:
    # The threshold counts terminated pods cluster-wide and the oldest go first, so this
    # test has a cluster of its own: pods other tests leave behind would be older.
    fresh_cluster.start()
    started: list[Process] = []
    namespace = "default"
    try:
        async with ApiClient(fresh_cluster.api_target, retry_seconds=20) as api:
            node = "gc-node"
            await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
            for i in range(4):
                created = await api.create(pod(f"done-{i}", namespace, node=node))
                created["status"]["phase"] = "Succeeded"
                await api.update_status(created)
                await asyncio.sleep(1.05)  # creationTimestamp has one-second resolution
            assert sum(1 for p in (await api.list("pods"))["items"] if is_pod_terminal(p)) == 4
            start_controller_manager(fresh_cluster, started, "--controllers", "podgc",
                                     "--terminated-pod-gc-threshold", "2")

            async def oldest_gone() -> bool:
                return [await get_or_none(api, "pods", f"done-{i}", namespace) is None
                        for i in range(4)] == [True, True, False, False]

            await wait_for(oldest_gone, timeout=20,
                           what="the two oldest terminated pods to go")
            await asyncio.sleep(2)  # a few more passes (period 0.5 s): the two newest stay
            assert await oldest_gone()
    finally:
        for proc in started:
            proc.stop()


async def test_ps3_orphaned_pod_goes_after_the_quarantine(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    await api.create(pod("orphan", namespace, node="no-such-node"))
    # A quarantine far longer than the check below, so a loaded machine cannot make the
    # 1 s look pass the quarantine (widen what is not the point of the test).
    controller_manager("--controllers", "podgc", "--pod-gc-quarantine-time", "8s")
    await asyncio.sleep(1.0)
    assert await get_or_none(api, "pods", "orphan", namespace) is not None

    async def gone() -> bool:
        return await get_or_none(api, "pods", "orphan", namespace) is None

    await wait_for(gone, timeout=30, what="the orphaned pod to be force deleted")
    assert await _marked_failed_before_deletion(api, "orphan", namespace,
                                                disruption_target=True)
    assert await recorded(api, namespace, reason="DeletionByPodGC", name="orphan")


async def test_ps3_orphan_check_rereads_the_node(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    """A node that appears during the quarantine saves its pods."""
    await api.create(pod("saved", namespace, node="late-node"))
    # A quarantine long enough that the node surely arrives inside it even on a loaded
    # machine (with 2 s, a create that took 1.5 s under load came after it: run a, seed
    # 1826956092); the check comes 2 s after the quarantine ends.
    quarantine = 8.0
    started = time.monotonic()
    controller_manager("--controllers", "podgc", "--pod-gc-quarantine-time",
                       f"{quarantine:g}s")
    await asyncio.sleep(0.5)
    await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "late-node"}})
    arrived = time.monotonic() - started
    try:
        assert arrived < quarantine, f"the node arrived {arrived:.1f}s after the start"
        await asyncio.sleep(quarantine + 2.0 - arrived)
        saved = await get_or_none(api, "pods", "saved", namespace)
        assert saved is not None and saved["status"]["phase"] == "Pending"
    finally:
        await api.delete("nodes", "late-node")


async def test_ps3_unscheduled_terminating_pod_is_marked_failed_and_deleted(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    created = pod("unscheduled", namespace)
    created["metadata"]["finalizers"] = ["skiff.test/hold"]  # keeps it Terminating
    await api.create(created)
    await api.delete("pods", "unscheduled", namespace)
    controller_manager("--controllers", "podgc")

    async def marked() -> bool:
        p = await api.get("pods", "unscheduled", namespace)
        return bool(p["status"]["phase"] == "Failed")

    await wait_for(marked, timeout=10, what="the pod to be marked Failed by PodGC")
    # Kubernetes 1.32 adds DisruptionTarget only for orphaned pods.
    assert get_condition(await api.get("pods", "unscheduled", namespace),
                         "DisruptionTarget") is None
    assert await recorded(api, namespace, reason="DeletionByPodGC", name="unscheduled")
    stuck = await api.get("pods", "unscheduled", namespace)
    stuck["metadata"]["finalizers"] = []
    await api.update(stuck)
    assert await get_or_none(api, "pods", "unscheduled", namespace) is None


async def test_ps3_terminating_pod_on_out_of_service_node_is_force_deleted(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    node = f"oos-{namespace}"
    await api.create({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                             "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    try:
        await api.create(pod("stuck", namespace, node=node))
        await api.create(pod("running", namespace, node=node))
        await api.delete("pods", "stuck", namespace)  # graceful: Terminating, 30 s
        controller_manager("--controllers", "podgc")

        async def gone() -> bool:
            return await get_or_none(api, "pods", "stuck", namespace) is None

        await wait_for(gone, timeout=10, what="the terminating pod to be force deleted")
        assert await _marked_failed_before_deletion(api, "stuck", namespace,
                                                disruption_target=False)
        # Only terminating pods: a pod nobody asked to delete stays.
        assert await get_or_none(api, "pods", "running", namespace) is not None
    finally:
        await api.delete("nodes", node)

"""SPEC PS1/PS2 with the real kubelet process: SIGSTOP it (a frozen or cut-off kubelet),
watch its node go Unknown and its pod be evicted gracefully but stay Terminating; SIGCONT
it and the kubelet itself finishes the termination and removes the pod object."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from skiff.api import get_condition
from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import get_or_none, wait_for
from tests.integration.objects import pod

UNREACHABLE = "node.kubernetes.io/unreachable"


async def test_ps2_sigstopped_kubelet_pods_stay_terminating_until_it_returns(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        shared_cluster: Cluster, tmp_path: Path) -> None:
    node = f"k-{namespace}"
    kubelet = shared_cluster.add_service(f"kubelet-{node}", "skiff.kubelet", [
        "--node-name", node, "--root-dir", str(tmp_path / "kubelet"),
        "--node-lease-renew-interval", "500ms", "--node-status-update-frequency", "1s"])
    try:
        async def node_ready() -> bool:
            n = await get_or_none(api, "nodes", node)
            return n is not None and (get_condition(n, "Ready") or {}).get("status") == "True"

        await wait_for(node_ready, timeout=20, what="the kubelet's node to be Ready")
        controller_manager()
        await api.create(pod("app", namespace, node=node, grace=5, tolerations=[
            {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 1}]))

        async def running() -> bool:
            p = await api.get("pods", "app", namespace)
            return bool(p["status"].get("phase") == "Running")

        await wait_for(running, timeout=20, what="the pod to run on the kubelet")

        kubelet.signal(signal.SIGSTOP)

        async def evicted() -> dict[str, object] | None:
            p = await api.get("pods", "app", namespace)
            return p if p["metadata"].get("deletionTimestamp") else None

        victim = await wait_for(evicted, timeout=15, what="the taint eviction")
        n = await api.get("nodes", node)
        assert (get_condition(n, "Ready") or {}).get("status") == "Unknown"
        assert (get_condition(victim, "DisruptionTarget") or {}).get(
            "reason") == "DeletionByTaintManager"
        await asyncio.sleep(7)  # past the 5 s grace period: still there, nobody forced it
        assert await get_or_none(api, "pods", "app", namespace) is not None

        kubelet.signal(signal.SIGCONT)

        async def gone() -> bool:
            return await get_or_none(api, "pods", "app", namespace) is None

        await wait_for(gone, timeout=20, what="the kubelet to finish the termination")
    finally:
        kubelet.signal(signal.SIGCONT)
        kubelet.stop()
        shared_cluster.services.pop(kubelet.name, None)
        if await get_or_none(api, "nodes", node) is not None:
            await api.delete("nodes", node)

"""SPEC SC1/FN3 with real processes: a node fenced by the power agent and then
unfenced, with the fencing controller switched off, gets its StatefulSet pod's ReadWriteOnce
volume attached again, and the same pod is Running and Ready within the kubelet's restart
backoff. Before the fix nothing re-attached the volume after the Fence was deleted and the
pod stayed Ready=False for good."""

from __future__ import annotations

from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import start_controller_manager
from tests.integration.fencing.conftest import (
    fence_manifest,
    register_kubelet,
    stop_node,
    wait_fence_gone,
    wait_fence_phase,
)
from tests.integration.fencing.unfence_helpers import (
    CONTROLLERS,
    pinned_stateful_set,
    volume_of,
    wait_attached,
    wait_detached,
    wait_running_and_ready,
)
from tests.integration.kubelet.conftest import start_kubelet

# The kubelet's restart backoff is at most 2 s here (FAST_FLAGS); the rest of the budget is
# for a kubelet process to start on a loaded 2-core machine.
BACK_WITHIN = 2 + 40


async def test_sc1_fn3_unfenced_node_gets_its_pods_rwo_volume_attached_again(
        api: ApiClient, namespace: str, shared_cluster: Cluster, fence_agent: Process,
        data_dir: Path, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--node-annotations", "skiff.io/fence-agent=power",
        "--volume-root", str(tmp_path / "volumes")])
    started: list[Process] = []
    try:
        register_kubelet(data_dir, node)
        start_controller_manager(shared_cluster, started, "--controllers", CONTROLLERS)
        await api.create(pinned_stateful_set("db", namespace, node.name))
        pod = await wait_running_and_ready(api, namespace, "db-0", timeout=40)
        volume = await volume_of(api, namespace, "data-db-0")
        await wait_attached(api, volume, node.name, timeout=10)

        await api.create(fence_manifest(node.name, "power"))
        await wait_fence_phase(api, node.name, "Fenced")
        await wait_detached(api, volume, timeout=20)  # FN3: a fenced node holds nothing

        await api.delete("fences", node.name)
        await wait_fence_gone(api, node.name)
        await wait_attached(api, volume, node.name, timeout=BACK_WITHIN)
        back = await wait_running_and_ready(api, namespace, "db-0", timeout=BACK_WITHIN)
        assert back["metadata"]["uid"] == pod["metadata"]["uid"]  # the same pod, restarted
    finally:
        for proc in started:
            proc.stop()
            shared_cluster.services.pop(proc.name, None)
        stop_node(data_dir, node)

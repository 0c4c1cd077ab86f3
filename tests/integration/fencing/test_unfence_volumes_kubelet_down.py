"""SPEC SC1/FN3: the Fence of a node is deleted while the node's kubelet is
still down (the test plays the fence agent). The attach/detach controller attaches the
volume the node's pod needs as soon as the Fence is gone — before the kubelet writes
anything — and the pod is Running and Ready once the kubelet is back."""

from __future__ import annotations

from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.conftest import start_controller_manager
from tests.integration.fencing.unfence_helpers import (
    CONTROLLERS,
    pinned_stateful_set,
    volume_of,
    wait_attached,
    wait_detached,
    wait_running_and_ready,
)
from tests.integration.kubelet.conftest import _kill_leftovers, start_kubelet
from tests.integration.waiting import get_or_none

BACK_WITHIN = 2 + 40  # restart backoff (FAST_FLAGS) + a loaded machine's process start


async def test_sc1_fn3_fence_deleted_while_kubelet_down_attaches_the_volume_again(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--volume-root", str(tmp_path / "volumes")])
    started: list[Process] = []
    try:
        start_controller_manager(shared_cluster, started, "--controllers", CONTROLLERS)
        await api.create(pinned_stateful_set("db", namespace, node.name))
        pod = await wait_running_and_ready(api, namespace, "db-0", timeout=40)
        volume = await volume_of(api, namespace, "data-db-0")
        await wait_attached(api, volume, node.name, timeout=10)

        # The agent's power-off: the kubelet and the pod's processes are gone.
        node.process.stop()
        _kill_leftovers(node.root)
        fence = await api.create({
            "apiVersion": "skiff.io/v1", "kind": "Fence", "metadata": {"name": node.name},
            "spec": {"nodeName": node.name, "agent": "power", "reason": "test",
                     "requestedBy": "tests/integration/fencing"}})
        fence["status"] = {"phase": "Fenced", "message": "powered off by the test"}
        await api.update_status(fence)
        await wait_detached(api, volume, timeout=20)

        await api.delete("fences", node.name)  # no finalizer: gone at once, kubelet down
        assert await get_or_none(api, "fences", node.name) is None
        await wait_attached(api, volume, node.name, timeout=20)
        assert not node.process.alive()  # attached from the Fence's deletion alone

        node.process.start()
        back = await wait_running_and_ready(api, namespace, "db-0", timeout=BACK_WITHIN)
        assert back["metadata"]["uid"] == pod["metadata"]["uid"]
    finally:
        for proc in started:
            proc.stop()
            shared_cluster.services.pop(proc.name, None)
        node.process.stop()
        _kill_leftovers(node.root)
        if await get_or_none(api, "nodes", node.name) is not None:
            await api.delete("nodes", node.name)

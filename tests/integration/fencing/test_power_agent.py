"""SPEC FN2: the power agent stops every process of a node, confirms it, keeps it down
until the Fence is deleted, and then brings the node's kubelet back."""

from __future__ import annotations

from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import Process
from skiff.cluster.state import ClusterState
from skiff.fence_agent.localnode import node_processes
from skiff.kubelet.records import load_state
from tests.integration.cluster import Cluster
from tests.integration.fencing.conftest import (
    alive,
    fence_manifest,
    recorded_kubelet,
    register_kubelet,
    stop_node,
    wait_fence_gone,
    wait_fence_phase,
)
from tests.integration.kubelet.conftest import pod_manifest, start_kubelet, wait_phase, wait_until
from tests.integration.waiting import recorded


def pod_pids(root: Path) -> list[int]:
    pids = []
    for state_file in root.glob("pods/*/state.json"):
        for entry in ((load_state(state_file.parent) or {}).get("containers") or {}).values():
            if entry.get("pid"):
                pids.append(int(entry["pid"]))
    return pids


def children_of(pids: list[int]) -> list[int]:
    """Processes whose parent is one of `pids` (the pod's forked `sleep`)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid in pids:
                out.append(int(entry.name))
    return out


async def test_fn2_power_agent_stops_every_process_of_the_node_and_confirms(
        api: ApiClient, namespace: str, shared_cluster: Cluster, fence_agent: Process,
        data_dir: Path, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path,
                         extra=["--node-annotations", "skiff.io/fence-agent=power"])
    try:
        register_kubelet(data_dir, node)
        assert (await api.get("nodes", node.name))["metadata"]["annotations"][
            "skiff.io/fence-agent"] == "power"
        await api.create(pod_manifest("pet", namespace, node.name, [{
            "name": "main", "command": ["sh", "-c", "sleep 3600 & sleep 3600; wait"]}]))
        await wait_phase(api, namespace, "pet", "Running")
        kubelet_pid = node.process.pid
        assert kubelet_pid is not None
        pids = pod_pids(node.root)
        forked = await wait_until(lambda: _async(children_of(pids)), what="the forked sleep")
        everything = [kubelet_pid, *pids, *forked]
        assert all(alive(p) for p in everything)

        await api.create(fence_manifest(node.name, "power"))
        fence = await wait_fence_phase(api, node.name, "Fenced")
        assert fence["status"]["confirmedAt"]
        assert "killed" in fence["status"]["message"]
        assert not node.process.alive()  # reaps our child, the kubelet
        assert [p for p in everything if alive(p)] == []
        state = ClusterState.load(data_dir)
        assert state is not None
        assert node_processes(state, node.name) == []
        assert (data_dir / "fenced" / node.name).exists()

        # Keep-down: a kubelet started again by hand is stopped again.
        node.process.start()
        restarted = node.process.pid
        assert restarted is not None

        async def stopped_again() -> bool:
            return not node.process.alive()

        await wait_until(stopped_again, timeout=15, what="the restarted kubelet killed again")
        assert await recorded(api, "default", reason="Fenced", name=node.name)
        assert await recorded(api, "default", reason="FenceBroken", name=node.name)
        assert recorded_kubelet(data_dir, node.name).pid == kubelet_pid

        await api.delete("fences", node.name)
        await wait_fence_gone(api, node.name)
        phases = [(v["object"] or {}).get("status", {}).get("phase")
                  for v in await api.history("fences", node.name)]
        assert phases[:3] == ["Pending", "Fencing", "Fenced"]
        assert phases[-2:] == ["Unfencing", None]  # then the finalizer went, and the object
        back = recorded_kubelet(data_dir, node.name)
        assert back.pid not in (kubelet_pid, restarted)
        assert alive(back.pid)
        assert not (data_dir / "fenced" / node.name).exists()
        assert await recorded(api, "default", reason="Unfenced", name=node.name)
    finally:
        stop_node(data_dir, node)


async def _async(value: list[int]) -> list[int]:
    return value

"""Node-pressure eviction (GT11) and its grace-period override (GT7) with real processes."""

from __future__ import annotations

import time
from pathlib import Path

from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    pod_manifest,
    recorder,
    start_kubelet,
    stop_kubelet,
    wait_file,
    wait_phase,
    wait_until,
)
from tests.integration.waiting import recorded


async def test_gt7_gt11_soft_eviction_uses_the_max_pod_grace_period(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    # 1 GiB of node memory and a soft threshold 4 MiB below it: one Python process's RSS
    # is enough pressure. The pod asks for 30 s; the eviction override allows 2 s.
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--capacity-memory", "1Gi", "--eviction-hard", "",
        "--eviction-soft", "memory.available<1020Mi",
        "--eviction-soft-grace-period", "memory.available=1s",
        "--eviction-max-pod-grace-period", "2"])
    try:
        path = tmp_path / "signals"
        await api.create(pod_manifest("p", namespace, node.name, [
            {"name": "main", "command": recorder(path)}], grace=30))
        started = await wait_file(path, "start")
        sigterm = await wait_file(path, "SIGTERM", timeout=15)
        dead = await wait_file(path, "dead")
        assert sigterm - started >= 1.0  # the soft threshold's grace period was observed
        # The override's 2 s, not the pod's 30 s (widened for a loaded machine).
        assert 1.8 <= dead - sigterm <= 4.0, f"killed {dead - sigterm:.2f}s after SIGTERM"
        pod = await wait_phase(api, namespace, "p", "Failed")
        assert pod["status"]["reason"] == "Evicted"
        assert "low on resource: memory" in pod["status"]["message"]
        assert not pod["metadata"].get("deletionTimestamp")  # evicted pods stay, Failed
        assert await recorded(api, namespace, reason="Evicted", name="p")

        async def pressure() -> bool:
            obj = await api.get("nodes", node.name)
            return any(c["type"] == "MemoryPressure" and c["status"] == "True"
                       for c in obj["status"]["conditions"])

        await wait_until(pressure, timeout=5, what="MemoryPressure=True")
        await api.delete("pods", "p", namespace)
        assert time.time() - dead < 60
    finally:
        await stop_kubelet(node)

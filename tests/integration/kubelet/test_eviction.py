"""Node-pressure eviction (GT11) and its grace-period override (GT7) with real processes."""

from __future__ import annotations

import time
from pathlib import Path

from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
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
        "--eviction-soft-grace-period", "memory.available=2s",
        "--eviction-max-pod-grace-period", "2"])
    try:
        path = tmp_path / "signals"
        await api.create(pod_manifest("p", namespace, node.name, [
            {"name": "main", "command": recorder(path)}], grace=30))
        started = await wait_file(path, "start")
        sigterm = await wait_file(path, "SIGTERM", timeout=15)
        dead = await wait_file(path, "dead")
        # The soft threshold's 2 s grace period was observed. It runs from the first
        # observation of pressure, which can precede the recorder's "start" line by the
        # time Python takes to start (0.96 s after a 1 s grace once, under load).
        assert sigterm - started >= 1.4, f"SIGTERM {sigterm - started:.2f}s after start"
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


async def test_gt11_hard_threshold_evicts_one_pod_per_interval_and_waits_for_the_kill(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    # Pressure whenever any pod runs (as above); a hard threshold, measured every 1 s.
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--capacity-memory", "1Gi", "--eviction-soft", "",
        "--eviction-hard", "memory.available<1020Mi", "--eviction-monitoring-interval", "1s"])
    try:
        for name in ("a", "b"):
            await api.create(pod_manifest(name, namespace, node.name, [
                {"name": "main", "command": recorder(tmp_path / f"signals-{name}")}],
                grace=3))
        evicted_at = []
        for name in ("a", "b"):
            pod = await wait_phase(api, namespace, name, "Failed", timeout=40)
            assert pod["status"]["reason"] == "Evicted"
            [event] = await recorded(api, namespace, reason="Evicted", name=name)
            evicted_at.append(parse_rfc3339(event["eventTime"]))
        # One pod per interval, as the kubelet recorded it: the second eviction came at
        # least one monitoring interval after the first (the manager also waits for the
        # first pod's kill before it looks again).
        first, second = sorted(evicted_at)
        assert second - first >= 0.9, f"two evictions {second - first:.2f}s apart"
    finally:
        await stop_kubelet(node)

"""Node-pressure eviction as Kubernetes 1.32's eviction manager does it, with real
processes: the override bounds preStop and the 2 s minimum comes last (GT6/GT7), hard
evictions use 1 s, critical pods are never evicted and evicted pods carry DisruptionTarget
(GT11)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    Node,
    first,
    pod_manifest,
    recorder,
    start_kubelet,
    stop_kubelet,
    wait_file,
    wait_phase,
    wait_until,
)

# 1 GiB of node memory and a threshold 4 MiB below it: one Python process's RSS is enough.
_PRESSURE = "memory.available<1020Mi"


async def _memory_pressure(api: ApiClient, node: Node) -> bool:
    obj = await api.get("nodes", node.name)
    return any(c["type"] == "MemoryPressure" and c["status"] == "True"
               for c in obj["status"]["conditions"])


def _times(path: Path) -> list[float]:
    try:
        return [float(t) for t in path.read_text().split()]
    except FileNotFoundError:
        return []


async def test_gt6_eviction_override_bounds_prestop_then_the_minimum_applies(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--capacity-memory", "1Gi", "--eviction-hard", "", "--eviction-soft", _PRESSURE,
        "--eviction-soft-grace-period", "memory.available=1s",
        "--eviction-max-pod-grace-period", "3"])
    try:
        path, hook = tmp_path / "signals", tmp_path / "prestop"
        await api.create(pod_manifest("p", namespace, node.name, [{
            "name": "main", "command": recorder(path),
            "lifecycle": {"preStop": {"exec": {"command": [
                "sh", "-c", f"date +%s.%N >> {hook}; sleep 20"]}}}}], grace=30))
        sigterm = await wait_file(path, "SIGTERM", timeout=30)
        dead = await wait_file(path, "dead")
        prestop = _times(hook)[0]
        # Kubernetes >= 1.28: the override (3 s) replaces the 30 s before preStop runs, so
        # the hook is abandoned after 3 s (not 20 s); then at least 2 s before SIGKILL.
        assert 2.5 <= sigterm - prestop <= 6.0, f"SIGTERM {sigterm - prestop:.2f}s in"
        assert 1.8 <= dead - sigterm <= 4.0, f"SIGKILL {dead - sigterm:.2f}s after SIGTERM"
        await wait_phase(api, namespace, "p", "Failed")
    finally:
        await stop_kubelet(node)


async def test_gt11_hard_eviction_spares_critical_pods_and_marks_the_victim(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    # Pressure only once the critical pod holds 64 MiB (one idle Python process, ~10 MiB,
    # is not enough), so the victim is running, its SIGTERM handler in place, before the
    # first eviction: a pod still starting can be evicted too (Kubernetes ranks pods
    # without stats first), and one killed before its handler runs records no SIGTERM.
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--capacity-memory", "1Gi", "--eviction-hard", "memory.available<984Mi",
        "--eviction-soft", ""])
    try:
        critical_path, victim_path = tmp_path / "critical", tmp_path / "victim"
        await api.create(pod_manifest("victim", namespace, node.name, [
            {"name": "main", "command": recorder(victim_path)}], grace=30))
        await wait_file(victim_path, "start")
        assert not await _memory_pressure(api, node), "pressure before the critical pod"
        await api.create(pod_manifest("critical", namespace, node.name, [
            {"name": "main", "command": recorder(critical_path, "--hold-mib", "64")}],
            grace=30, priorityClassName="system-node-critical"))
        sigterm = await wait_file(victim_path, "SIGTERM", timeout=30)
        dead = await wait_file(victim_path, "dead")
        # Hard eviction: override 1 s (>= 1.31), then the 2 s minimum; not the pod's 30 s.
        assert dead - sigterm <= 4.0, f"SIGKILL {dead - sigterm:.2f}s after SIGTERM"
        pod = await wait_phase(api, namespace, "victim", "Failed")
        assert pod["status"]["reason"] == "Evicted"
        target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert target and target[0]["status"] == "True", pod["status"]["conditions"]
        assert target[0]["reason"] == "TerminationByKubelet"
        assert "low on resource: memory" in target[0]["message"]
        # The pressure stays with only the critical pod left, and critical pods
        # (priority >= 2000000000, static or mirror) are never evicted: over three more
        # monitoring intervals it keeps running.
        await wait_until(lambda: _memory_pressure(api, node), timeout=15,
                         what="MemoryPressure=True with only the critical pod")
        await asyncio.sleep(3.0)
        assert await _memory_pressure(api, node)
        critical = await api.get("pods", "critical", namespace)
        assert critical["status"]["phase"] == "Running"
        assert first(critical_path, "SIGTERM") is None, "the critical pod was evicted"
        # And while the pressure lasts the kubelet admits no new BestEffort pod: it is
        # refused, never started (Kubernetes' eviction admission).
        late_path = tmp_path / "late"
        await api.create(pod_manifest("late", namespace, node.name, [
            {"name": "main", "command": recorder(late_path)}], grace=30))
        late = await wait_phase(api, namespace, "late", "Failed")
        assert late["status"]["reason"] == "Evicted"
        assert late["status"]["message"] == (
            "Pod was rejected: The node had condition: [MemoryPressure]. ")
        assert not late_path.exists(), "a rejected pod was started"
    finally:
        await stop_kubelet(node)

"""A kubelet given several apiservers keeps running the pods bound to it after it
fails over (compose HA scenario 4: the pet recreated on node-3 stayed Pending for good)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from skiff.api import ApiError
from skiff.client import ApiClient, Informer
from tests.integration.blackhole import Blackhole
from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import wait_for


async def test_issue11_informer_survives_a_failover_caused_by_another_call(
        ha_cluster: HaCluster) -> None:
    """One client is shared by an informer and other callers (a kubelet's lease renewal,
    a controller's writes). When one of those calls makes the client fail over, the
    informer's healthy stream on the replaced connection ends, and the informer must resume
    on the new apiserver instead of stopping for good."""
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    ha_cluster.add_apiserver()
    ns = f"t-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    async with ApiClient(ha_cluster.targets, retry_seconds=30, timeout=5) as api:
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        informer = Informer(api, "leases", namespace=ns)
        informer.add_handler(on_add=lambda o: seen.append(o["metadata"]["name"]))
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(30)
            await api.create(_lease("before", ns))
            await wait_for(lambda: _has(seen, "before"), timeout=30, what="the first add")
            # What a failed call of another caller does: move to the next apiserver.
            await api.reconnect(generation=api.generation)
            assert api.target == ha_cluster.api_target(1)
            await api.create(_lease("after", ns))
            await wait_for(lambda: _has(seen, "after"), timeout=30,
                           what="the add made after the failover")
            assert not task.done(), "the informer keeps running"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@pytest.mark.timeout(300)
async def test_issue11_kubelet_runs_a_pod_bound_after_its_apiserver_is_cut(
        ha_cluster: HaCluster, tmp_path: Any) -> None:
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    ha_cluster.add_apiserver()
    node = f"node-{uuid.uuid4().hex[:6]}"
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with Blackhole(ha_cluster.api_ports[0]) as hole, \
            ApiClient(ha_cluster.api_target(1), retry_seconds=30, timeout=10) as api:
        # The kubelet reaches apiserver-1 through a link the test can cut like a partition.
        targets = f"{hole.target},{ha_cluster.api_target(1)}"
        health = _free_port()
        from skiff.cluster.processes import service_process, wait_grpc_healthy
        from skiff.cluster.sandboxes import pod_network_namespace
        proc = service_process(f"kubelet-{node}", "skiff.kubelet", [
            "--apiserver", targets, "--health-port", str(health),
            "--node-name", node, "--root-dir", str(tmp_path / node),
            "--pod-network-namespace", pod_network_namespace(tmp_path),  # not the default
            "--node-status-update-frequency", "1s", "--node-lease-duration-seconds", "4",
            "--capacity-cpu", "8", "--capacity-memory", "64Gi"],
            log_dir=ha_cluster.root / "logs", env={"SKIFF_LOG_FORMAT": "json"})
        ha_cluster.services.append(proc)
        proc.start()
        await asyncio.to_thread(wait_grpc_healthy, proc, f"127.0.0.1:{health}", timeout=60)
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        try:
            await api.create(_pod("before", ns, node))
            await wait_for(lambda: _running(api, "before", ns), timeout=60,
                           what="a pod running before the cut")

            hole.cut()
            # The kubelet notices the dead link (keepalive or a call's deadline), fails over.
            log = ha_cluster.root / "logs" / f"kubelet-{node}.log"
            await wait_for(lambda: _failed_over(log), timeout=90, interval=0.5,
                           what="the kubelet failing over")
            await api.create(_pod("after", ns, node))
            await wait_for(lambda: _running(api, "after", ns), timeout=60,
                           what="a pod bound to the node after the failover running")
            assert proc.alive()
        finally:
            # The kubelet kills its pods' processes when they are deleted (stopping it
            # alone would leave them running).
            await _delete_pods(api, ns, node, proc.alive())


async def _delete_pods(api: ApiClient, ns: str, node: str, kubelet_alive: bool) -> None:
    for name in ("before", "after"):
        with contextlib.suppress(ApiError):
            await api.delete("pods", name, ns, grace_period_seconds=1)
    if not kubelet_alive:
        return

    async def gone() -> bool:
        left = await api.list("pods", ns, field_selector=f"spec.nodeName={node}")
        return not left["items"]

    with contextlib.suppress(Exception):
        await wait_for(gone, timeout=60, what="the test's pods deleted by the kubelet")


def _free_port() -> int:
    from skiff.cluster.processes import free_port
    return free_port()


def _lease(name: str, ns: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns}, "spec": {"holderIdentity": name}}


def _pod(name: str, ns: str, node: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


async def _has(seen: list[str], name: str) -> bool:
    return name in seen


async def _running(api: ApiClient, name: str, ns: str) -> bool:
    pod = await api.get("pods", name, ns)
    return bool(pod.get("status", {}).get("phase") == "Running")


async def _failed_over(log: Any) -> bool:
    try:
        return "failing over" in log.read_text()
    except FileNotFoundError:
        return False

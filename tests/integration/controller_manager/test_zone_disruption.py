"""SPEC PS2 with real processes, Kubernetes 1.32's zone disruption: when every node of
every zone stops reporting at once (here all kubelets SIGSTOPped: the control plane cut
off from all nodes), the node lifecycle controller taints nothing NoExecute and so evicts
nothing, with the default tainting rates. Once a node reports again the other zones'
silent nodes are tainted (at the normal rate) and their pods evicted as usual.

The test has a cluster of its own: the shared one has other tests' nodes in it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.api import get_condition
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.controller_manager.kubelet_double import get_or_none, wait_for
from tests.integration.kubelet.conftest import _kill_leftovers
from tests.integration.objects import pod

UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"
TOLERATION = 6  # seconds a pod tolerates the unreachable taint
# Compressed periods, but Kubernetes' default tainting rates and zone thresholds.
PERIODS = ["--node-monitor-period", "500ms", "--node-monitor-grace-period", "3s",
           "--node-startup-grace-period", "3s", "--leader-elect", "false",
           "--controllers", "nodelifecycle"]
ZONES = {"n1": "zone-a", "n2": "zone-a", "n3": "zone-b"}


@pytest.fixture
def cluster(fresh_cluster: Cluster) -> Iterator[Cluster]:
    yield fresh_cluster.start()


def tolerating(seconds: int) -> list[dict[str, object]]:
    return [{"key": key, "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": seconds} for key in (UNREACHABLE, NOT_READY)]


def lifecycle_no_execute(node: Obj) -> list[str]:
    taints = (node.get("spec") or {}).get("taints") or []
    return [t["key"] for t in taints
            if t.get("effect") == "NoExecute" and t.get("key") in (UNREACHABLE, NOT_READY)]


async def test_ps2_control_plane_cut_off_from_every_node_evicts_nothing(
        cluster: Cluster, tmp_path: Path) -> None:
    kubelets: dict[str, Process] = {}
    try:
        for name, zone in ZONES.items():
            kubelets[name] = cluster.add_service(f"kubelet-{name}", "skiff.kubelet", [
                "--node-name", name, "--root-dir", str(tmp_path / name),
                "--node-labels", f"topology.kubernetes.io/zone={zone}",
                "--node-status-update-frequency", "1s", "--node-lease-renew-interval",
                "500ms", "--node-lease-duration-seconds", "4"])
        async with ApiClient(cluster.api_target, retry_seconds=20) as api:
            await api.create({"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": "zd"}})
            for name in ZONES:
                await api.create(pod(f"app-{name}", "zd", node=name, grace=1,
                                     tolerations=tolerating(TOLERATION)))

            async def all_running() -> bool:
                pods = (await api.list("pods", "zd"))["items"]
                return len(pods) == 3 and all(p["status"].get("phase") == "Running"
                                              for p in pods)

            await wait_for(all_running, timeout=40, what="a pod running on every node")
            cluster.add_service("controller-manager", "skiff.controller_manager", PERIODS)

            for proc in kubelets.values():
                proc.signal(signal.SIGSTOP)

            async def all_unknown() -> bool:
                nodes = (await api.list("nodes"))["items"]
                return all((get_condition(n, "Ready") or {}).get("status") == "Unknown"
                           for n in nodes)

            await wait_for(all_unknown, timeout=20, what="every node Ready=Unknown")

            async def untainted() -> bool:
                nodes = (await api.list("nodes"))["items"]
                return not any(lifecycle_no_execute(n) for n in nodes)

            # Well past the toleration: nothing tainted NoExecute, nothing evicted.
            for _ in range(2 * (TOLERATION + 3)):
                await asyncio.sleep(0.5)
                await wait_for(untainted, timeout=5, what="no NoExecute lifecycle taint")
            for name in ZONES:
                app = await api.get("pods", f"app-{name}", "zd")
                assert not app["metadata"].get("deletionTimestamp"), name
                assert get_condition(app, "DisruptionTarget") is None, name
                ready = get_condition(app, "Ready") or {}
                assert ready.get("status") == "False"  # marked not ready, as in Kubernetes

            # Zone a's n1 reports again: zone b alone is fully disrupted, so n3 is tainted
            # at the normal rate (0.1 nodes/s, after a fresh grace period) and its pod goes.
            kubelets["n1"].signal(signal.SIGCONT)

            async def n3_pod_evicted() -> bool:
                app = await get_or_none(api, "pods", "app-n3", "zd")
                return bool(app and app["metadata"].get("deletionTimestamp"))

            await wait_for(n3_pod_evicted, timeout=60, what="n3's pod evicted")
            n3 = await api.get("nodes", "n3")
            assert lifecycle_no_execute(n3) == [UNREACHABLE]
    finally:
        for name, proc in kubelets.items():
            proc.signal(signal.SIGCONT)
            proc.stop()
            _kill_leftovers(tmp_path / name)

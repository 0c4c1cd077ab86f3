"""SPEC AU10 with a real kubelet as root: a pod filling its emptyDir on the node's
filesystem (here a 64 MiB tmpfs holding the kubelet's root directory, mounted and unmounted
by the test) crosses `nodefs.available`; the node reports DiskPressure, admits no new pod,
and the kubelet evicts the pod with Kubernetes' message, then reclaims its emptyDir."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    start_kubelet,
    stop_kubelet,
    wait_gone,
    wait_phase,
    wait_until,
)
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.waiting import recorded

pytestmark = pytest.mark.integration


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "nodefs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)],
                   check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


async def test_au10_disk_pressure_evicts_the_pod_filling_its_empty_dir(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster,
        small_fs: Path) -> None:
    # 40 MiB written into a 64 MiB filesystem leaves less than 40 % of it available
    node = start_kubelet(sandbox_cluster.cluster, small_fs, name=f"dp-{uuid.uuid4().hex[:6]}",
                         extra=["--pod-network-namespace", sandbox_cluster.pod_network,
                                "--pod-cidr-wait", "30s",
                                "--eviction-hard", "nodefs.available<40%",
                                "--eviction-pressure-transition-period", "6s"])
    ns = sb_namespace
    try:
        await sb_api.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "filler", "namespace": ns},
            "spec": {"nodeName": node.name, "terminationGracePeriodSeconds": 30,
                     "volumes": [{"name": "scratch", "emptyDir": {}}],
                     "containers": [{
                         "name": "c", "command": ["sh", "-c", (
                             "dd if=/dev/zero of=/scratch/fill bs=1M count=40; "
                             "exec sleep 3600")],
                         "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]}})

        async def disk_pressure() -> bool:
            obj = await sb_api.get("nodes", node.name)
            return any(c["type"] == "DiskPressure" and c["status"] == "True"
                       for c in obj["status"]["conditions"])

        await wait_until(disk_pressure, timeout=40, interval=0.2, what="DiskPressure=True")
        # under DiskPressure the kubelet admits no new pod (but critical ones)
        await sb_api.create({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": ns},
            "spec": {"nodeName": node.name,
                     "containers": [{"name": "c", "command": ["sleep", "3600"]}]}})
        late = await wait_phase(sb_api, ns, "late", "Failed", timeout=30)
        assert (late["status"]["reason"], late["status"]["message"]) == (
            "Evicted", "Pod was rejected: The node had condition: [DiskPressure]. ")
        pod = await wait_phase(sb_api, ns, "filler", "Failed", timeout=40)
        assert pod["status"]["reason"] == "Evicted"
        message = pod["status"]["message"]
        assert message.startswith("The node was low on resource: ephemeral-storage. "
                                  "Threshold quantity: "), message
        [event] = await recorded(sb_api, ns, reason="Evicted", name="filler")
        assert event["message"] == message

        # the evicted pod's emptyDir is reclaimed: the pressure goes after its period
        async def no_disk_pressure() -> bool:
            return not await disk_pressure()

        await wait_until(no_disk_pressure, timeout=30, interval=0.2, what="DiskPressure=False")
        for name in ("filler", "late"):
            await sb_api.delete("pods", name, ns)
            await wait_gone(sb_api, ns, name, timeout=30)
    finally:
        await stop_kubelet(node)

"""A node of a `skiff up --netns` cluster power-cycled by the power
fence agent (Kubernetes' e2e "StatefulSet should come back up if node goes down"), or a
kubelet that crashed together with its pods, restarts its pods in a sandbox it reuses or
makes again — never a pod reported `Running` with no process behind it.

The kubelet runs under `ip netns exec`, in a mount namespace of its own: the bind mounts
that keep its pods' network namespaces die with it, while their /run/netns entries stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.fence_agent import FINALIZER
from skiff.kubelet.records import load_state
from skiff.kubelet.sandbox.network import pod_netns_name
from tests.integration.partitions.conftest import (
    NAMESPACE,
    StartCluster,
    alive,
    container_pid,
    get_or_none,
    in_pod_sandbox,
    wait_for,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]

# A bare pod that tolerates its node's outage for good (only the restart is under test,
# not eviction), on node-1.
TOLERATE_OUTAGE = [{"key": key, "operator": "Exists", "effect": "NoExecute"}
                   for key in ("node.kubernetes.io/unreachable",
                               "node.kubernetes.io/not-ready")]
WORKER_FAILED = "pod worker failed"


def web_pod() -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 1,
                     "tolerations": TOLERATE_OUTAGE,
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sh", "-c", "sleep 3600"]}]}}


async def running_web(api: ApiClient) -> Obj:
    async def running() -> Obj | None:
        pod = await get_or_none(api, "pods", "web", NAMESPACE)
        if pod is None or pod.get("status", {}).get("phase") != "Running":
            return None
        statuses = pod["status"].get("containerStatuses") or []
        return pod if statuses and statuses[0]["state"].get("running") else None
    pod: Obj = await wait_for(running, timeout=30, what="pod web Running")
    return pod


def eth0_addresses(pid: int) -> str:
    """`ip -4 addr` of eth0 as the container `pid` sees it (its own network namespace)."""
    out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-4", "-o", "addr",
                          "show", "dev", "eth0"], capture_output=True, text=True, timeout=10)
    return out.stdout


def kill_pod_groups(root: Path) -> list[int]:
    """SIGKILL every process group the kubelet recorded for its pods (a power-off's view of
    them); returns the container PIDs."""
    pids = []
    for state_file in root.glob("pods/*/state.json"):
        for entry in ((load_state(state_file.parent) or {}).get("containers") or {}).values():
            if entry.get("pgid"):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(entry["pgid"]), signal.SIGKILL)
                pids.append(int(entry["pid"]))
    return pids


async def restarted_after(api: ApiClient, old: Obj) -> Obj:
    """The pod Running again with a new container (restartCount ≥ 1, a new containerID)
    whose process is alive."""
    old_id = old["status"]["containerStatuses"][0]["containerID"]

    async def back() -> Obj | None:
        pod = await get_or_none(api, "pods", "web", NAMESPACE)
        if pod is None or pod["status"].get("phase") != "Running":
            return None
        status = pod["status"]["containerStatuses"][0]
        if (not status["state"].get("running") or status.get("containerID") in (None, old_id)
                or status["restartCount"] < 1):
            return None
        return pod if alive(container_pid(pod)) else None
    pod: Obj = await wait_for(back, timeout=40, what="pod web restarted with a live process")
    return pod


def kubelet_log(cluster: NetnsCluster) -> str:
    return Path(cluster.component("kubelet-node-1").log).read_text(errors="replace")


async def test_defect8_a_power_cycled_node_restarts_its_pods(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    # The fencing controller is off: the Fence is ours, as an operator's would be.
    cluster = netns_cluster(nodes=1, extra_args={
        "controller-manager": ["--controllers", "*,-fencing"]})
    api = await api_of(cluster)
    await api.create(web_pod())
    old = await running_web(api)
    old_pid = container_pid(old)
    ip = old["status"]["podIP"]
    assert ip != "127.0.0.1" and f" {ip}/" in eth0_addresses(old_pid)

    await api.create({"apiVersion": "skiff.io/v1", "kind": "Fence",
                      "metadata": {"name": "node-1", "finalizers": [FINALIZER]},
                      "spec": {"nodeName": "node-1", "agent": "power", "reason": "test",
                               "requestedBy": "tests/integration/partitions"}})

    async def fenced() -> bool:
        fence = await get_or_none(api, "fences", "node-1")
        return bool(fence and (fence.get("status") or {}).get("phase") == "Fenced")
    await wait_for(fenced, timeout=20, what="Fence node-1 Fenced")
    assert not alive(old_pid)  # powered off: the pod's process is gone with the node

    await api.delete("fences", "node-1")  # unfence: the node is powered on again

    async def unfenced() -> bool:
        return await get_or_none(api, "fences", "node-1") is None
    await wait_for(unfenced, timeout=30, what="Fence node-1 gone (node powered on)")

    pod = await restarted_after(api, old)
    status = pod["status"]["containerStatuses"][0]
    terminated = status["lastState"]["terminated"]
    assert terminated["reason"] == "ContainerStatusUnknown" and terminated["exitCode"] == 137
    assert terminated["message"] == ("The container could not be located when the pod was "
                                     "deleted.  The container used to be Running")
    new_pid = container_pid(pod)
    kubelet = cluster.component("kubelet-node-1")
    assert in_pod_sandbox(new_pid, pod, kubelet.pid)  # in a sandbox, not the node's network
    assert pod["status"]["podIP"] == ip and f" {ip}/" in eth0_addresses(new_pid)
    assert WORKER_FAILED not in kubelet_log(cluster)


async def test_defect8_a_sandbox_left_from_before_a_kubelet_crash_is_reused_or_remade(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=1)
    api = await api_of(cluster)
    await api.create(web_pod())
    old = await running_web(api)
    ip = old["status"]["podIP"]
    uid = old["metadata"]["uid"]
    root = cluster.data_dir / "nodes" / "node-1"

    crashed = cluster.kill("kubelet-node-1")
    for pid in kill_pod_groups(root):
        await wait_for(functools.partial(_gone, pid), timeout=5, what=f"{pid} gone")
    assert not alive(crashed)
    # What the crash left: the sandbox's /run/netns entry (its mount died with the kubelet's
    # mount namespace) and the pod's address in the node's IPAM.
    assert Path("/run/netns", pod_netns_name(uid)).exists()

    cluster.restart("kubelet-node-1")
    pod = await restarted_after(api, old)
    new_pid = container_pid(pod)
    assert pod["status"]["podIP"] == ip and f" {ip}/" in eth0_addresses(new_pid)
    kubelet = cluster.component("kubelet-node-1")
    assert in_pod_sandbox(new_pid, pod, kubelet.pid)
    assert WORKER_FAILED not in kubelet_log(cluster)


async def _gone(pid: int) -> bool:
    gone = not alive(pid)
    await asyncio.sleep(0)
    return gone


async def test_defect8_a_kubelet_crash_keeps_a_running_pods_sandbox_and_ip(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    """Only the kubelet crashes: its pod runs on, in the namespace the new kubelet must find
    again (its /run/netns entry lost its mount), with the same IP in the status."""
    cluster = netns_cluster(nodes=1)
    api = await api_of(cluster)
    await api.create(web_pod())
    old = await running_web(api)
    pid, ip = container_pid(old), old["status"]["podIP"]
    net = os.stat(f"/proc/{pid}/ns/net").st_ino

    cluster.kill("kubelet-node-1")
    kubelet = cluster.restart("kubelet-node-1")

    async def sandbox_found() -> bool:
        with contextlib.suppress(OSError):
            entry = f"/proc/{kubelet.pid}/root/run/netns/{pod_netns_name(old['metadata']['uid'])}"
            return os.stat(entry).st_ino == net
        return False
    await wait_for(sandbox_found, timeout=20, what="the pod's namespace bound again")
    await asyncio.sleep(2)  # a few status syncs of the restarted kubelet
    pod = await running_web(api)
    status = pod["status"]["containerStatuses"][0]
    assert container_pid(pod) == pid and alive(pid) and status["restartCount"] == 0
    assert pod["status"]["podIP"] == ip and f" {ip}/" in eth0_addresses(pid)
    assert WORKER_FAILED not in kubelet_log(cluster)

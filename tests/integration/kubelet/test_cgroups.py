"""Container cgroups with a real kubelet as root (SPEC AU8): `limits.memory` is enforced by
the kernel and a container over it is OOMKilled (exit 137), restarted per its policy with
lastState saying so; `limits.cpu` throttles a busy loop; a container re-adopted by a
restarted kubelet (GT8) keeps its limit, its OOM kill is still reported, and its log goes on
rotating without a lost line; the pod's cgroups go with the pod and nothing of the node's is
left under /sys/fs/cgroup after the kubelet is stopped."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skiff.api.types import Obj
from skiff.cgroupfs import RECORD_FILE
from skiff.client import ApiClient
from skiff.cluster.processes import wait_grpc_healthy
from skiff.kubelet.cgroups import detect_node, node_cgroup_name
from skiff.kubelet.logs import rotated_logs
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    Node,
    container_status,
    get_pod,
    pod_manifest,
    start_kubelet,
    stop_kubelet,
    wait_gone,
    wait_until,
)
from tests.integration.kubelet.test_container_logs import numbers, read_any

pytestmark = pytest.mark.integration  # as root, as CI runs: cgroups need it

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def node_cgroup_dirs(node: Node) -> list[Path]:
    """Where the kubelet (a child of this process, so in the same cgroups) put the node."""
    layout = detect_node()
    assert layout is not None, "this machine has no usable cgroup hierarchy"
    name = node_cgroup_name(node.name, node.root)
    dirs = [base / name for base in layout.bases.values()]
    assert (node.root / RECORD_FILE).read_text().split() == [str(d) for d in dirs]
    return dirs


@pytest.fixture
async def cg_node(shared_cluster: Cluster, tmp_path: Path) -> AsyncIterator[Node]:
    node = start_kubelet(shared_cluster, tmp_path)
    try:
        yield node
    finally:
        await stop_kubelet(node)
    assert not [d for d in node_cgroup_dirs(node) if d.exists()], \
        "the node's cgroups outlived the test"


def pid_of(pod: Obj, container: str) -> int:
    return int(container_status(pod, container)["containerID"].removeprefix("process://"))


async def test_au8_memory_limit_oomkills_with_exit_137(
        api: ApiClient, namespace: str, cg_node: Node) -> None:
    # 200 MiB really written (bytes * n touches every page) against a 32 MiB limit
    hog = [sys.executable, "-c", "import time; b = b'x' * (200 << 20); time.sleep(60)"]
    await api.create(pod_manifest("hog", namespace, cg_node.name, [{
        "name": "c", "command": hog,
        "resources": {"limits": {"memory": "32Mi", "cpu": "500m"}}}], grace=1))

    async def oom_killed_and_restarted() -> Obj | None:
        pod = await get_pod(api, namespace, "hog")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return statuses[0] if statuses and statuses[0].get("restartCount", 0) >= 1 and \
            statuses[0].get("lastState", {}).get("terminated") else None

    status = await wait_until(oom_killed_and_restarted, timeout=40, interval=0.2,
                              what="an OOM kill and a restart")
    last = status["lastState"]["terminated"]
    assert (last["reason"], last["exitCode"]) == ("OOMKilled", 137), last
    await api.delete("pods", "hog", namespace, grace_period_seconds=1)
    await wait_gone(api, namespace, "hog", timeout=30)
    pod_dirs = [p for d in node_cgroup_dirs(cg_node) for p in d.rglob("pod*")]
    assert not pod_dirs, f"the pod's cgroups outlived it: {pod_dirs}"


async def test_au8_a_sigkill_not_from_the_oom_killer_is_error_not_oomkilled(
        api: ApiClient, namespace: str, cg_node: Node) -> None:
    # a container that kills itself with SIGKILL under a generous limit: Error, not OOMKilled
    await api.create(pod_manifest("k", namespace, cg_node.name, [{
        "name": "c", "command": [sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"],
        "resources": {"limits": {"memory": "64Mi"}}}], grace=1, restartPolicy="Never"))

    async def terminated() -> Obj | None:
        pod = await get_pod(api, namespace, "k")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return statuses[0]["state"].get("terminated") if statuses else None

    state = await wait_until(terminated, timeout=30, what="the container's exit")
    assert (state["reason"], state["exitCode"]) == ("Error", 137), state


async def test_au8_cpu_limit_throttles_a_busy_loop(
        api: ApiClient, namespace: str, cg_node: Node) -> None:
    await api.create(pod_manifest("spin", namespace, cg_node.name, [{
        "name": "c", "command": [sys.executable, "-c", "while True: pass"],
        "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}], grace=1))

    async def running() -> Obj | None:
        pod = await get_pod(api, namespace, "spin")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        return pod if statuses and "running" in statuses[0]["state"] else None

    pid = pid_of(await wait_until(running, timeout=30, what="spin running"), "c")

    def cpu_seconds() -> float:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    await asyncio.sleep(0.5)
    before, start = cpu_seconds(), asyncio.get_running_loop().time()
    await asyncio.sleep(3)
    used = (cpu_seconds() - before) / (asyncio.get_running_loop().time() - start)
    # 100m = 10 ms of CPU per 100 ms period; an unthrottled loop uses a whole core
    assert used <= 0.15, f"the busy loop used {used:.0%} of a core under limits.cpu 100m"
    await api.delete("pods", "spin", namespace, grace_period_seconds=1)
    await wait_gone(api, namespace, "spin", timeout=30)


# Numbered lines for about 3 s, then, once the test says so, far more memory than allowed.
READOPTED = """
import os, sys, time
for i in range(6000):
    sys.stdout.write(f"line {i:08d} " + "x" * 85 + "\\n")
    if i % 100 == 99:
        sys.stdout.flush()
        time.sleep(0.05)
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
b = b"x" * (200 << 20)
"""


async def test_au8_au10_gt8_a_readopted_container_keeps_its_limits_and_log_rotation(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--container-log-max-size", "64Ki", "--container-log-monitor-interval", "100ms"])
    gate = tmp_path / "allocate-now"
    try:
        await api.create(pod_manifest("p", namespace, node.name, [{
            "name": "c", "command": [sys.executable, "-u", "-c", READOPTED, str(gate)],
            "resources": {"limits": {"memory": "48Mi"}}}], grace=1, restartPolicy="Never"))

        async def running() -> Obj | None:
            pod = await get_pod(api, namespace, "p")
            statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
            return pod if statuses and "running" in statuses[0]["state"] else None

        pod = await wait_until(running, timeout=30, what="p running")
        logs = node.root / "pods" / pod["metadata"]["uid"] / "logs" / "c"
        await asyncio.sleep(1)
        node.process.kill()  # the kubelet dies mid-output; the container goes on
        await asyncio.sleep(0.5)
        node.process.start()
        wait_grpc_healthy(node.process, node.health_target)
        await asyncio.sleep(3)  # the rest of the output, rotated by the new kubelet
        current = logs / "0.log"
        kept = [read_any(f) for f in rotated_logs(current)] + [current.read_text()]
        seen = numbers("".join(kept))
        assert seen == list(range(seen[0], 6000)), "lines were lost across the restart"
        assert len(kept) <= 5
        gate.touch()

        async def terminated() -> Obj | None:
            p = await get_pod(api, namespace, "p")
            statuses = (p or {}).get("status", {}).get("containerStatuses") or []
            return statuses[0]["state"].get("terminated") if statuses else None

        state = await wait_until(terminated, timeout=30, what="the OOM kill")
        assert (state["reason"], state["exitCode"]) == ("OOMKilled", 137), state
    finally:
        await stop_kubelet(node)

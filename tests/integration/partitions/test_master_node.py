"""SPEC SC2, master–node partition (SPEC "Testing"): node-1, running the pet `db-0`,
is cut by nftables from every other host of a netns cluster. With power fencing the node is
fenced and `db-0` comes back elsewhere; without, `db-0` stays Terminating until the
partition heals. In both, the checker proves there never were two `db-0` processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from skiff.api import get_condition
from skiff.checker.report import time_to_first_heartbeat
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from tests.integration.partitions.conftest import (
    FENCING_DELAY,
    GRACE_SECONDS,
    NAMESPACE,
    TOLERATION_SECONDS,
    StartCluster,
    alive,
    assert_no_overlap,
    beats_of,
    container_pid,
    events,
    fences,
    get_or_none,
    in_netns,
    in_pod_sandbox,
    log_lines,
    node_ready_status,
    running_db,
    start_db_on,
    uids_in_log,
    wait_for,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]


async def test_sc2_master_node_partition_with_power_fencing_moves_the_pet_once(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=3)
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    old_uid, old_pid = old["metadata"]["uid"], container_pid(old)
    kubelet = cluster.component("kubelet-node-1")
    assert in_pod_sandbox(old_pid, old, kubelet.pid) and in_netns(kubelet.pid, kubelet.netns)

    cut_at = time.monotonic()
    cluster.partition("node-1")

    async def unknown() -> bool:
        return await node_ready_status(api, "node-1") == "Unknown"

    await wait_for(unknown, timeout=GRACE_SECONDS + 10, what="node-1 Ready=Unknown")

    async def fenced() -> dict[str, object] | None:
        fence = await get_or_none(api, "fences", "node-1")
        return fence if fence and (fence.get("status") or {}).get("phase") == "Fenced" else None

    fence = await wait_for(fenced, timeout=FENCING_DELAY + 15, what="Fence node-1 Fenced")
    assert fence["spec"]["agent"] == "power"
    # The agent confirmed: the kubelet and the pet's process are really dead.
    assert not alive(kubelet.pid) and not alive(old_pid)

    new = await running_db(api, other_than=old_uid, timeout=30)
    assert new["spec"]["nodeName"] in ("node-2", "node-3")
    assert in_pod_sandbox(container_pid(new), new, cluster.component(
        f"kubelet-{new['spec']['nodeName']}").pid)
    claim = await api.get("persistentvolumeclaims", "data-db-0", NAMESPACE)
    attachment = await api.get("volumeattachments", f"pvc-{claim['metadata']['uid']}")
    assert attachment["spec"]["nodeName"] == new["spec"]["nodeName"]
    await wait_for(lambda: beats_of(cluster, new["metadata"]["uid"]), timeout=10,
                   what="the replacement's first heartbeat")
    recovery = time_to_first_heartbeat(log_lines(cluster), "db-0", cut_at)
    assert recovery is not None
    print(f"\npartition → replacement's first heartbeat: {recovery:.2f}s (grace "
          f"{GRACE_SECONDS:g}s + fencing delay {FENCING_DELAY:g}s + fence, delete, "
          f"schedule, attach, start)")
    deleted = [e for e in await events(api, reason="PodForceDeletedAfterFencing")
               if e["involvedObject"].get("uid") == old_uid]
    assert len(deleted) == 1
    assert uids_in_log(cluster) == [old_uid, new["metadata"]["uid"]]
    assert_no_overlap(cluster)

    # Heal: node-1 stays down (power fence keep-down) and cordoned until unfenced.
    cluster.heal("node-1")
    await asyncio.sleep(2)
    node = await api.get("nodes", "node-1")
    assert node["spec"].get("unschedulable") is True
    assert await node_ready_status(api, "node-1") == "Unknown"
    assert not alive(cluster.component("kubelet-node-1").pid)

    await api.delete("fences", "node-1")

    async def back() -> bool:
        n = await api.get("nodes", "node-1")
        fence_gone = await get_or_none(api, "fences", "node-1") is None
        return fence_gone and not n["spec"].get("unschedulable") and \
            (get_condition(n, "Ready") or {}).get("status") == "True"

    await wait_for(back, timeout=30, what="node-1 unfenced, Ready and uncordoned")
    restarted = cluster.component("kubelet-node-1")
    assert restarted.pid != kubelet.pid and in_netns(restarted.pid, restarted.netns)
    assert (await api.get("pods", "db-0", NAMESPACE))["metadata"]["uid"] == new["metadata"]["uid"]
    assert_no_overlap(cluster)


async def test_sc2_master_node_partition_without_fencing_keeps_the_pet_terminating(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(
        nodes=2, node_annotations={f"node-{i}": "skiff.io/fence-agent=none" for i in (1, 2)},
        extra_args={"controller-manager": ["--default-fence-agent", "none"]})
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    old_uid, old_pid = old["metadata"]["uid"], container_pid(old)

    cluster.partition("node-1")

    async def terminating() -> bool:
        pod = await get_or_none(api, "pods", "db-0", NAMESPACE)
        return bool(pod and pod["metadata"].get("deletionTimestamp"))

    await wait_for(terminating, timeout=GRACE_SECONDS + TOLERATION_SECONDS + 10,
                   what="db-0 evicted (Terminating)")
    assert await node_ready_status(api, "node-1") == "Unknown"
    # Well past grace + toleration + fencing delay + the pod's grace period: nothing moves.
    await asyncio.sleep(FENCING_DELAY + 6)
    pod = await api.get("pods", "db-0", NAMESPACE)
    assert pod["metadata"]["uid"] == old_uid and pod["metadata"].get("deletionTimestamp")
    assert (get_condition(pod, "DisruptionTarget") or {}).get("status") == "True"
    assert await fences(api) == []
    assert uids_in_log(cluster) == [old_uid]
    assert alive(old_pid)  # the cut-off kubelet never heard of the deletion

    cluster.heal("node-1")

    async def old_gone() -> bool:
        p = await get_or_none(api, "pods", "db-0", NAMESPACE)
        return p is None or p["metadata"]["uid"] != old_uid

    await wait_for(old_gone, timeout=20, what="the kubelet to finish db-0's termination")
    assert not alive(old_pid)
    new = await running_db(api, other_than=old_uid, timeout=30)
    await wait_for(lambda: beats_of(cluster, new["metadata"]["uid"]), timeout=10,
                   what="the replacement's first heartbeat")
    assert uids_in_log(cluster) == [old_uid, new["metadata"]["uid"]]
    assert_no_overlap(cluster)

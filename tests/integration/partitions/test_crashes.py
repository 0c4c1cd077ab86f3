"""SPEC SC2, crashes: a kubelet SIGKILLed and restarted re-adopts its pod; two
controller-managers whose leader is SIGKILLed mid-fence, and a lone controller-manager
that crashes mid-fence and restarts, both finish the fence exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.topology import Topology
from tests.integration.partitions.conftest import (
    GRACE_SECONDS,
    NAMESPACE,
    StartCluster,
    alive,
    assert_no_overlap,
    beats_of,
    container_pid,
    events,
    get_or_none,
    node_ready_status,
    running_db,
    start_db_on,
    uids_in_log,
    wait_for,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]
LEASE = ("leases", "skiff-controller-manager", "kube-system")
RESTART_FENCING_DELAY = 30.0


async def test_sc2_kubelet_crash_and_restart_readopts_the_running_pet(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    # A restart is no partition: fencing waits longer here than the partition scenarios'
    # 2 s, so a kubelet whose Python start-up outlasts the 3 s grace on a loaded machine
    # (CI at load 12-15) is not powered off before it is back; Kubernetes waits 60 s.
    cluster = netns_cluster(nodes=2, extra_args={
        "controller-manager": ["--fencing-delay", f"{RESTART_FENCING_DELAY:g}s"]})
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    uid, pid = old["metadata"]["uid"], container_pid(old)

    crashed = cluster.kill("kubelet-node-1")
    assert not alive(crashed) and alive(pid)  # the pod's process group outlives its kubelet
    restarted = cluster.restart("kubelet-node-1")
    assert restarted.pid != crashed
    before = await beats_of(cluster, uid)
    await asyncio.sleep(GRACE_SECONDS)
    assert await node_ready_status(api, "node-1") == "True"
    pod = await api.get("pods", "db-0", NAMESPACE)
    assert pod["metadata"]["uid"] == uid and not pod["metadata"].get("deletionTimestamp")
    assert container_pid(pod) == pid and alive(pid)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert await beats_of(cluster, uid) > before  # still beating: one process, adopted
    assert uids_in_log(cluster) == [uid]
    assert_no_overlap(cluster)


async def _fence_requested(api: ApiClient) -> Obj:
    async def requested() -> Obj | None:
        return await get_or_none(api, "fences", "node-1")
    fence: Obj = await wait_for(requested, timeout=GRACE_SECONDS + 15,
                                what="Fence node-1 requested")
    return fence


async def _finishes_once(cluster: NetnsCluster, api: ApiClient, old_uid: str,
                         fence_uid: str) -> None:
    """db-0 comes back elsewhere; one Fence ever, one force delete, no overlap."""
    new = await running_db(api, other_than=old_uid, timeout=40)
    assert new["spec"]["nodeName"] != "node-1"
    await wait_for(lambda: beats_of(cluster, new["metadata"]["uid"]), timeout=10,
                   what="the replacement's first heartbeat")
    versions = await api.history("fences", "node-1")
    assert {(v["object"] or {}).get("metadata", {}).get("uid") for v in versions} - {None} \
        == {fence_uid}
    fence = await api.get("fences", "node-1")
    assert fence["status"]["phase"] == "Fenced" and fence["status"]["podsDeleted"] == 1
    deleted = [e for e in await events(api, reason="PodForceDeletedAfterFencing")
               if e["involvedObject"].get("uid") == old_uid]
    assert len(deleted) == 1
    assert uids_in_log(cluster) == [old_uid, new["metadata"]["uid"]]
    assert_no_overlap(cluster)


async def test_sc2_concurrent_controller_managers_leader_killed_mid_fence_fence_once(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    # No fence agent yet: the Fence stays Pending, so the leader dies mid-fence for sure.
    cluster = netns_cluster(nodes=2, topology=Topology(controller_managers=2), fence_agent=False)
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    lease = await api.get(*LEASE)
    leader = lease["spec"]["holderIdentity"]
    assert leader in ("controller-manager", "controller-manager-2")

    cluster.partition("node-1")
    fence = await _fence_requested(api)
    assert fence["spec"]["requestedBy"] == f"controller-manager/{leader}"
    cluster.kill(leader)
    cluster.start_fence_agent(echo=lambda _line: None)

    await _finishes_once(cluster, api, old["metadata"]["uid"], fence["metadata"]["uid"])
    survivor = (await api.get(*LEASE))["spec"]["holderIdentity"]
    assert survivor != leader and survivor in ("controller-manager", "controller-manager-2")


async def test_sc2_controller_manager_crash_mid_fence_restarts_and_fences_once(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=2, fence_agent=False)
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")

    cluster.partition("node-1")
    fence = await _fence_requested(api)
    cluster.kill("controller-manager")
    cluster.start_fence_agent(echo=lambda _line: None)

    async def fenced() -> bool:
        f = await api.get("fences", "node-1")
        return (f.get("status") or {}).get("phase") == "Fenced"

    await wait_for(fenced, timeout=15, what="Fence node-1 Fenced by the agent")
    await asyncio.sleep(1)
    # Confirmed, but no controller is running: only the fencing controller deletes pods.
    pod = await api.get("pods", "db-0", NAMESPACE)
    assert pod["metadata"]["uid"] == old["metadata"]["uid"]
    cluster.restart("controller-manager")
    await _finishes_once(cluster, api, old["metadata"]["uid"], fence["metadata"]["uid"])

"""SPEC SC2, node–node partition: node-1 (running `db-0`) and node-2 lose each other but
both still reach the control plane, so nothing may be evicted or fenced."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

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
    container_pid,
    fences,
    node_ready_status,
    reaches,
    start_db_on,
    uids_in_log,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]


async def test_sc2_node_node_partition_evicts_and_fences_nothing(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=2)
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    uid, pid = old["metadata"]["uid"], container_pid(old)

    assert await reaches(cluster, "node-1", "node-2"), "node-1 reaches node-2 before the cut"
    cluster.partition("node-1", "node-2")
    # The cut took effect, and only between the two nodes.
    assert not await reaches(cluster, "node-1", "node-2")
    assert not await reaches(cluster, "node-2", "node-1")
    for node in ("node-1", "node-2"):
        assert await reaches(cluster, node, "apiserver"), f"{node} still reaches the apiserver"
    # Longer than grace + toleration + fencing delay together: had anyone mistaken the cut
    # for a dead node, it would have acted by now.
    await asyncio.sleep(GRACE_SECONDS + TOLERATION_SECONDS + FENCING_DELAY + 2)
    assert [await node_ready_status(api, n) for n in ("node-1", "node-2")] == ["True", "True"]
    pod = await api.get("pods", "db-0", NAMESPACE)
    assert pod["metadata"]["uid"] == uid and not pod["metadata"].get("deletionTimestamp")
    assert await fences(api) == []
    assert alive(pid)
    assert not await reaches(cluster, "node-1", "node-2"), "the cut held throughout"
    assert cluster.heal("node-1").startswith("healed node-1")
    assert await reaches(cluster, "node-1", "node-2")
    assert uids_in_log(cluster) == [uid]
    assert_no_overlap(cluster)

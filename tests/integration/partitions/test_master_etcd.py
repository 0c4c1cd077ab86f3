"""SPEC SC2, master–etcd partition: the apiserver is cut from etcd. Writes fail cleanly
(ServiceUnavailable or Timeout, nothing half-written), no controller acts on what it last
saw (no pod deleted, no Fence), and the cluster recovers once the cut heals."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from skiff.api import ApiError, Reason
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
    get_or_none,
    node_ready_status,
    start_db_on,
    uids_in_log,
    wait_for,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]


def namespace(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


async def test_sc2_master_etcd_partition_fails_writes_cleanly_and_nobody_acts_on_stale_data(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=2)
    api = await api_of(cluster)
    old = await start_db_on(api, cluster, "node-1")
    uid, pid = old["metadata"]["uid"], container_pid(old)

    cluster.partition("apiserver", "etcd")
    cut_at = time.monotonic()
    async with ApiClient(cluster.api, retry_seconds=0, timeout=10,
                         credentials=cluster.admin) as once:
        with pytest.raises(ApiError) as failed:
            await once.create(namespace("during-the-cut"))
    # etcd unreachable: ServiceUnavailable naming etcd, or (the write may have reached etcd
    # before the cut) kube-apiserver's 504 Timeout, never a false success or Conflict
    assert failed.value.reason in (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT), failed.value
    if failed.value.reason == Reason.SERVICE_UNAVAILABLE:
        assert "etcd" in failed.value.message
    # The cut outlasts grace + toleration + fencing delay: time enough for a controller to
    # evict or fence on what it last saw, if it acted on stale data.
    left = GRACE_SECONDS + TOLERATION_SECONDS + FENCING_DELAY + 1 - (time.monotonic() - cut_at)
    await asyncio.sleep(max(left, 0))
    cluster.heal("apiserver")

    async def writable() -> bool:
        try:
            await api.create(namespace("after-the-cut"))
        except ApiError as err:
            if err.reason == Reason.ALREADY_EXISTS:
                return True
            if err.reason in (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT):
                return False
            raise
        return True

    await wait_for(writable, timeout=30, what="writes to work again after the heal")
    # No half-write: the refused create is either absent or whole, written exactly once (a
    # request still in a send buffer of the cut connection may land after the heal, which
    # is why the error told the client to read before retrying).
    late = await get_or_none(api, "namespaces", "during-the-cut")
    if late is not None:
        versions = await api.history("namespaces", "during-the-cut")
        assert len(versions) == 1 and versions[0]["object"]["metadata"]["uid"] == \
            late["metadata"]["uid"]

    async def nodes_ready() -> bool:
        return [await node_ready_status(api, n) for n in ("node-1", "node-2")] == \
            ["True", "True"]

    await wait_for(nodes_ready, timeout=15, what="both nodes Ready after the heal")
    # And for a while after: nobody acts on the leases that went stale during the cut.
    await asyncio.sleep(TOLERATION_SECONDS + FENCING_DELAY + 1)
    pod = await api.get("pods", "db-0", NAMESPACE)
    assert pod["metadata"]["uid"] == uid and not pod["metadata"].get("deletionTimestamp")
    assert await fences(api) == []
    assert alive(pid)
    assert uids_in_log(cluster) == [uid]
    assert_no_overlap(cluster)

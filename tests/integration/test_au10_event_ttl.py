"""SPEC AU10 (etcd stays bounded): kube-apiserver's `--event-ttl`, against a real etcd and
apiserver. An Event is stored on an etcd lease, so etcd deletes it that long after its last
write (a watcher sees it DELETED); an update puts it on a lease counted from the update;
other kinds never expire.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aetcd
import aetcd.rpc as etcdrpc

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.cluster import Cluster


def _event(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Tested", "message": "first", "type": "Normal"}


async def _lease(etcd: aetcd.Client, name: str) -> tuple[int, int]:
    """(lease id, seconds it has left) of the stored Event `name`."""
    resp = await etcd.kvstub.Range(etcdrpc.RangeRequest(
        key=f"/registry/events/default/{name}".encode()))
    (kv,) = resp.kvs
    left = await etcd.leasestub.LeaseTimeToLive(etcdrpc.LeaseTimeToLiveRequest(ID=kv.lease))
    return int(kv.lease), int(left.TTL)


async def test_au10_event_ttl_etcd_deletes_an_event_after_its_ttl_and_watchers_see_it(
        tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, apiserver_args=["--event-ttl", "3s"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target) as api, \
                aetcd.Client(port=cluster.etcd_port) as etcd:
            start = (await api.list("events", "default"))["metadata"]["resourceVersion"]
            await api.create(_event("short"))
            await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "kept", "namespace": "default"}})
            lease, left = await _lease(etcd, "short")
            assert lease != 0 and 0 < left <= 3
            written = time.monotonic()

            async def deleted() -> str:
                async for ev in api.watch("events", "default", resource_version=start):
                    if ev.type == "DELETED":
                        return str(ev.object["metadata"]["name"])
                raise AssertionError("the watch ended")

            assert await asyncio.wait_for(deleted(), 20) == "short"
            assert time.monotonic() - written >= 1.5
            assert (await api.list("events", "default"))["items"] == []
            assert await api.get("configmaps", "kept", "default")
    finally:
        cluster.stop()


async def test_au10_event_ttl_an_update_counts_the_ttl_from_itself(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, apiserver_args=["--event-ttl", "30s"])
    try:
        cluster.start()
        async with ApiClient(cluster.api_target) as api, \
                aetcd.Client(port=cluster.etcd_port) as etcd:
            created = await api.create(_event("again"))
            first, _ = await _lease(etcd, "again")
            await asyncio.sleep(3.2)  # past the reuse window (5 % of 30 s: 1 s)
            created["message"] = "second"
            created["count"] = 2
            await api.update(created)
            second, left = await _lease(etcd, "again")
            first_left = (await etcd.leasestub.LeaseTimeToLive(
                etcdrpc.LeaseTimeToLiveRequest(ID=first))).TTL
            assert second != first
            assert left > first_left  # counted from the update, not the create
    finally:
        cluster.stop()

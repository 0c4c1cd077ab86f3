"""SPEC TR1 across a failover: a batch whose apiserver is killed while it runs is resent to
the other apiserver, and every item lands exactly once — none lost, none applied twice."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.ha.conftest import HaCluster

COUNT = 500


def _configmap(name: str, namespace: str, value: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"v": value}}


def _pod(name: str, namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@contextlib.asynccontextmanager
async def _kill_once_some_landed(ha_cluster: HaCluster, namespace: str, resource: str,
                                 landed: int) -> AsyncIterator[None]:
    """SIGKILL the first apiserver once `landed` of the writes made inside the block are in
    etcd: mid-batch, by what is stored, not by a guess of timing. A watch through the second
    apiserver from the revision before the block sees each write as it lands (a list
    polled instead was slower than a whole batch of 500 on a fast machine)."""
    async with ApiClient(ha_cluster.api_target(1), retry_seconds=10) as reader:
        revision = (await reader.list(resource, namespace))["metadata"]["resourceVersion"]

        async def kill() -> None:
            done: set[str] = set()
            async with contextlib.aclosing(reader.watch(
                    resource, namespace, resource_version=revision)) as events:
                async for event in events:
                    o = event.object
                    if event.type == "MODIFIED" and (o.get("data", {}).get("v") == "new"
                                                     or o.get("spec", {}).get("nodeName")):
                        done.add(o["metadata"]["name"])
                    if len(done) >= landed:
                        break
            ha_cluster.apiservers[0].kill()

        killer = asyncio.create_task(kill())
        yield
        await killer


@contextlib.asynccontextmanager
async def _clients(ha_cluster: HaCluster) -> AsyncIterator[tuple[ApiClient, ApiClient, str]]:
    """Two apiservers on one etcd; a plain client, a batching one and a namespace."""
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    ha_cluster.add_apiserver()
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with ApiClient(ha_cluster.targets, retry_seconds=30, timeout=10) as plain, \
            ApiClient(ha_cluster.targets, retry_seconds=30, timeout=10, batch=True,
                      batch_items=1000, batch_delay=0.05,
                      batch_resources=frozenset({"configmaps"})) as batching:
        await plain.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns}})
        yield plain, batching, ns


async def test_tr1_batch_interrupted_by_a_failover_lands_every_item_once(
        ha_cluster: HaCluster) -> None:
    async with _clients(ha_cluster) as (plain, batching, ns):
        for i in range(COUNT):
            await plain.create(_configmap(f"cm-{i}", ns, "old"))
        assert batching.target == ha_cluster.api_target(0)

        # unconditional updates: a repeat would be a second version of the same content
        async with _kill_once_some_landed(ha_cluster, ns, "configmaps", COUNT // 100):
            written = await asyncio.gather(*(  # every caller answered, none with an error
                batching.update(_configmap(f"cm-{i}", ns, "new")) for i in range(COUNT)))

        assert batching.failovers >= 1 and batching.target == ha_cluster.api_target(1)
        assert [o["data"]["v"] for o in written] == ["new"] * COUNT
        for i in range(COUNT):
            versions = await plain.history("configmaps", f"cm-{i}", ns)
            assert [v["object"]["data"]["v"] for v in versions] == ["old", "new"], (
                f"cm-{i}: every item once")


async def test_tr1_bindings_interrupted_by_a_failover_bind_every_pod_once(
        ha_cluster: HaCluster) -> None:
    async with _clients(ha_cluster) as (plain, batching, ns):
        uids = {}
        for i in range(COUNT):
            uids[f"p-{i}"] = (await plain.create(_pod(f"p-{i}", ns)))["metadata"]["uid"]

        assert batching.target == ha_cluster.api_target(0)
        async with _kill_once_some_landed(ha_cluster, ns, "pods", COUNT // 100):
            bound = await asyncio.gather(*(  # a Bind resent after it landed is no Conflict
                batching.bind(ns, name, f"node-{i % 7}", uid=uid)
                for i, (name, uid) in enumerate(uids.items())))

        assert batching.failovers >= 1
        assert [p["spec"]["nodeName"] for p in bound] == [f"node-{i % 7}"
                                                          for i in range(COUNT)]
        for name in uids:
            versions = await plain.history("pods", name, ns)
            assert len(versions) == 2, f"{name}: created, then bound once"

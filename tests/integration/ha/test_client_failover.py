"""Clients take several apiservers and fail over, resuming watches exactly."""

from __future__ import annotations

import asyncio
import uuid

from skiff.api import ApiError, Reason
from skiff.client import ApiClient, Informer
from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import wait_for


def _lease(name: str, namespace: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": name}}


async def _create(api: ApiClient, name: str, namespace: str) -> None:
    try:
        await api.create(_lease(name, namespace))
    except ApiError as err:
        # A create in flight when its apiserver died may have been applied; the retry on
        # the other apiserver then finds it.
        if err.reason != Reason.ALREADY_EXISTS:
            raise


async def test_issue11_informer_fails_over_on_sigkill_with_every_revision_once(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_single_etcd()
    ha_cluster.add_apiserver()
    ha_cluster.add_apiserver()
    ns = f"t-{uuid.uuid4().hex[:8]}"
    seen: list[int] = []
    async with ApiClient(ha_cluster.targets, retry_seconds=30, timeout=5) as watcher, \
            ApiClient(ha_cluster.targets, retry_seconds=30, timeout=5) as writer:
        await writer.create({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns}})
        informer = Informer(watcher, "leases", namespace=ns, watch_idle_timeout=10)
        informer.add_handler(
            on_add=lambda o: seen.append(int(o["metadata"]["resourceVersion"])),
            on_update=lambda old, new: seen.append(int(new["metadata"]["resourceVersion"])),
            on_delete=lambda o: seen.append(-1))
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(30)
            assert watcher.target == ha_cluster.api_target(0)
            for i in range(15):
                await _create(writer, f"before-{i}", ns)
            await wait_for(lambda: _done(seen, 15), what="the first 15 events")

            ha_cluster.apiservers[0].kill()
            for i in range(15):
                await _create(writer, f"after-{i}", ns)

            final = await writer.list("leases", ns)
            committed = sorted(int(o["metadata"]["resourceVersion"]) for o in final["items"])
            assert len(committed) == 30
            await wait_for(lambda: _done(seen, 30), timeout=60, what="all 30 events")
            await asyncio.sleep(1.5)  # a repeated event would arrive now
            assert seen == committed, "every etcd revision seen exactly once, in order"
            assert watcher.target == ha_cluster.api_target(1)
            assert watcher.failovers >= 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _done(seen: list[int], count: int) -> bool:
    return len(seen) >= count

"""An update that names the watch cache's newest revision starts from the cache's copy
(issue 37: no etcd read before the swap) and answers exactly as one that read etcd first:
Conflict for a revision etcd has moved past, NotFound for an object deleted meanwhile, even
when the cache has not seen that yet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from skiff.api import ApiError, Reason, lookup
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

KEY = storage_key(lookup("configmaps"), "default", "a")


def _cm(value: str, rv: str = "") -> Obj:
    meta: Obj = {"name": "a", "namespace": "default"}
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": value}}


Cluster = tuple[MemoryStorage, WatchCache, Registry, "asyncio.Task[None]"]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    task = asyncio.create_task(cache.run())
    await cache.ready()
    yield store, cache, registry, task
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _stale_cache(cluster: Cluster) -> str:
    """A ConfigMap the cache has seen at the revision returned; then the cache stops seeing
    writes (as one lagging behind etcd)."""
    _, cache, registry, task = cluster
    rv = str((await registry.create("configmaps", "default", _cm("1"))).object[
        "metadata"]["resourceVersion"])
    await _cached(cache, rv)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return rv


async def _cached(cache: WatchCache, rv: str) -> None:
    for _ in range(100):
        raw = cache.recent(KEY)
        if raw is not None and str(raw.revision) == rv:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cache never saw the write")


async def _refused(registry: Registry, rv: str) -> str:
    """The reason the update of the ConfigMap at `rv` is refused with."""
    with pytest.raises(ApiError) as err:
        await registry.update("configmaps", "default", _cm("2", rv), name="a")
    return str(err.value.reason)


async def test_an_update_naming_the_newest_revision_succeeds_from_the_cache(
        cluster: Cluster) -> None:
    store, cache, registry, _ = cluster
    rv = str((await registry.create("configmaps", "default", _cm("1"))).object[
        "metadata"]["resourceVersion"])
    await _cached(cache, rv)
    updated = (await registry.update("configmaps", "default", _cm("2", rv), name="a")).object
    assert updated["data"] == {"k": "2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(rv)
    stored, _ = await store.get(KEY)
    assert stored is not None and stored.obj is not None
    assert stored.obj["data"] == {"k": "2"}


async def test_a_write_the_cache_has_not_seen_still_makes_the_update_a_conflict(
        cluster: Cluster) -> None:
    store, cache, registry, _ = cluster
    rv = await _stale_cache(cluster)
    await store.update(KEY, _cm("other"), expected_revision=int(rv))
    assert str(cache.recent(KEY).revision) == rv  # type: ignore[union-attr]
    assert await _refused(registry, rv) == Reason.CONFLICT
    stored, _ = await store.get(KEY)
    assert stored is not None and stored.obj is not None
    assert stored.obj["data"] == {"k": "other"}


async def test_a_delete_the_cache_has_not_seen_makes_the_update_not_found(
        cluster: Cluster) -> None:
    store, _, registry, _ = cluster
    rv = await _stale_cache(cluster)
    await store.delete(KEY, expected_revision=int(rv))
    assert await _refused(registry, rv) == Reason.NOT_FOUND

"""The in-memory `Storage` answers as etcd does (SPEC AS3–AS6), and the registry and the
watch cache run on it: compare-and-swap writes, reads at a past revision, history, pages of
a list and a watch from a revision."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

from skiff.api import ApiError, Reason
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache


def _cm(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": value}}


async def test_writes_compare_revisions_and_reads_go_back_in_time() -> None:
    store: Storage = MemoryStorage()
    key = "/registry/configmaps/default/a"
    created = await store.create(key, _cm("a", "1"))
    first = int(created["metadata"]["resourceVersion"])
    with pytest.raises(ApiError) as exists:
        await store.create(key, _cm("a", "2"))
    assert exists.value.reason == Reason.ALREADY_EXISTS
    await store.update(key, _cm("a", "2"), expected_revision=first)
    with pytest.raises(ApiError) as stale:
        await store.update(key, _cm("a", "3"), expected_revision=first)
    assert stale.value.reason == Reason.CONFLICT
    old, _ = await store.get(key, revision=first)
    assert old is not None and old.obj is not None and old.obj["data"] == {"k": "1"}
    now, _ = await store.get(key)
    assert now is not None
    await store.delete(key, expected_revision=now.mod_revision)
    assert (await store.get(key))[0] is None
    assert [kv.obj is None for kv in await store.history(key)] == [False, False, True]


async def test_pages_of_a_list_are_read_at_one_revision() -> None:
    store = MemoryStorage()
    for name in ("a", "b", "c"):
        await store.create(f"/registry/configmaps/default/{name}", _cm(name, name))
    page = await store.list_page("/registry/configmaps/", limit=2)
    assert [kv.key.rsplit("/", 1)[1] for kv in page.items] == ["a", "b"]
    assert page.more and page.remaining == 1
    await store.create("/registry/configmaps/default/d", _cm("d", "d"))
    rest = await store.list_page("/registry/configmaps/", revision=page.revision,
                                 start=page.next_key, limit=2)
    assert [kv.key.rsplit("/", 1)[1] for kv in rest.items] == ["c"]
    assert not rest.more


async def test_the_registry_and_watch_cache_run_on_memory() -> None:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    task = asyncio.create_task(cache.run())
    try:
        await cache.ready()
        created = await registry.create("configmaps", "default", _cm("a", "1"))
        rv = created.object["metadata"]["resourceVersion"]
        events = registry.watch("configmaps", "default", resource_version=rv)
        assert isinstance(events, AsyncGenerator)
        await registry.update("configmaps", "default", _cm("a", "2"), name="a")
        try:
            event = await asyncio.wait_for(anext(events), 5)
        finally:
            await events.aclose()
        assert (event.type, event.object["data"]) == ("MODIFIED", {"k": "2"})
        listed = await registry.list("configmaps", "default")
        assert [item["data"] for item in listed["items"]] == [{"k": "2"}]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

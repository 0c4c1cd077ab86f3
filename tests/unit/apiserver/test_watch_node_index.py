"""SPEC AS5 with one watch per kubelet: the watch cache keeps pod watchers indexed by the
`spec.nodeName` their field selector requires (Kubernetes' cacher trigger), and what each
watcher receives is exactly what the same selector gives without the index — a pod bound
to the node arrives as ADDED, its updates as MODIFIED, its deletion as DELETED, and a
watcher of unbound pods (`spec.nodeName=`) sees the bound pod leave as DELETED."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from skiff.api.kinds import KINDS, REGISTRY_PREFIX, lookup, storage_prefix
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import _POD_PREFIX, WatchCache, WatchRequest

Seen = list[tuple[str, str]]


@pytest.fixture
async def registry() -> AsyncIterator[tuple[MemoryStorage, Registry]]:
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    task = asyncio.create_task(cache.run())
    await cache.ready()
    yield store, registry
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _pod(name: str, node: str = "", phase: str = "Pending") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec, "status": {"phase": phase}}


async def _follow(registry: Registry, selector: str, after: int, seen: Seen) -> None:
    async for batch in registry.watch_batches("pods", None, resource_version=str(after),
                                              field_selector=selector):
        seen.extend((ev.type, ev.object["metadata"]["name"]) for ev in batch
                    if ev.type != "BOOKMARK")


def test_as5_the_node_index_covers_exactly_the_pods_keys() -> None:
    assert _POD_PREFIX == storage_prefix(lookup("pods"))
    pods = lookup("pods")
    assert [k.resource for k in KINDS
            if k is not pods and storage_prefix(k).startswith(_POD_PREFIX)] == []
    assert _POD_PREFIX.startswith(REGISTRY_PREFIX)


async def test_as5_a_kubelets_indexed_watch_sees_what_its_selector_selects(
        registry: tuple[MemoryStorage, Registry]) -> None:
    store, reg = registry
    after = reg.cache.revision
    seen: dict[str, Seen] = {"spec.nodeName=node-a": [], "spec.nodeName=node-b": [],
                             "spec.nodeName=": [],
                             # not indexable (a label-free "!=" term): woken for every event
                             "spec.nodeName!=node-b": []}
    followers = [asyncio.create_task(_follow(reg, sel, after, got))
                 for sel, got in seen.items()]
    try:
        key1, key2 = "/registry/pods/default/p1", "/registry/pods/default/p2"
        made = await store.create(key1, _pod("p1"))  # unbound
        rv = int(made["metadata"]["resourceVersion"])
        bound = await store.update(key1, _pod("p1", "node-a"), expected_revision=rv)
        rv = int(bound["metadata"]["resourceVersion"])
        running = await store.update(key1, _pod("p1", "node-a", "Running"),
                                     expected_revision=rv)
        await store.delete(key1, expected_revision=int(running["metadata"]["resourceVersion"]))
        other = await store.create(key2, _pod("p2", "node-b"))  # created bound
        await store.delete(key2, expected_revision=int(other["metadata"]["resourceVersion"]))
        expected = {"spec.nodeName=node-a": 3, "spec.nodeName=node-b": 2,
                    "spec.nodeName=": 2, "spec.nodeName!=node-b": 4}
        for _ in range(100):  # each watcher's last event, or 5 s on a loaded machine
            if all(len(seen[sel]) >= count for sel, count in expected.items()):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)  # and nothing more after it
        assert seen["spec.nodeName=node-a"] == [
            ("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]
        assert seen["spec.nodeName=node-b"] == [("ADDED", "p2"), ("DELETED", "p2")]
        assert seen["spec.nodeName="] == [("ADDED", "p1"), ("DELETED", "p1")]
        assert seen["spec.nodeName!=node-b"] == [
            ("ADDED", "p1"), ("MODIFIED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]
    finally:
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)


async def test_as5_a_watcher_that_leaves_frees_its_node_slot(
        registry: tuple[MemoryStorage, Registry]) -> None:
    """Many kubelets come and go: a closed watch leaves nothing behind to wake."""
    store, reg = registry
    cache = reg.cache
    request = WatchRequest(lookup("pods"), None, lambda _: True, node_name="node-a")
    watch = cache.watch_batches(request, cache.revision)
    pending = asyncio.ensure_future(anext(watch))
    await store.create("/registry/pods/default/p3", _pod("p3", "node-a"))
    batch = await asyncio.wait_for(pending, 2)
    assert [ev.object["metadata"]["name"] for ev in batch] == ["p3"]
    await watch.aclose()  # type: ignore[attr-defined]
    assert cache._by_node == {} and cache._subscribers == set()

"""SPEC AS5: a watch gets a BOOKMARK every bookmark interval — not once. The alarm that
wakes an idle watcher for it is set again after each one, and a watcher that is busy
when it rings still gets its next one (a watch cache over a memory store)."""

from __future__ import annotations

import asyncio

from skiff.api.kinds import lookup
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache, WatchRequest

CONFIGMAPS = lookup("configmaps")


async def _bookmarks_within(seconds: float, *, writes_every: float | None) -> int:
    store = MemoryStorage()
    cache = WatchCache(store, bookmark_interval=0.1)
    tasks = [asyncio.create_task(cache.run())]
    request = WatchRequest(CONFIGMAPS, "default", lambda _: True, selects_all=True)
    bookmarks = 0

    async def write() -> None:
        i = 0
        assert writes_every is not None
        while True:
            i += 1
            await store.create(f"/registry/configmaps/default/cm-{i}", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i}", "namespace": "default"}})
            await asyncio.sleep(writes_every)

    async def watch() -> None:
        nonlocal bookmarks
        async for batch in cache.watch_batches(request, cache.revision):
            bookmarks += sum(1 for ev in batch if ev.type == "BOOKMARK")

    try:
        await cache.ready()
        if writes_every is not None:
            tasks.append(asyncio.create_task(write()))
        tasks.append(asyncio.create_task(watch()))
        await asyncio.sleep(seconds)
        return bookmarks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_as5_an_idle_watch_gets_a_bookmark_every_interval() -> None:
    assert await _bookmarks_within(0.65, writes_every=None) >= 4


async def test_as5_a_watch_with_events_still_gets_its_bookmarks() -> None:
    assert await _bookmarks_within(0.65, writes_every=0.03) >= 3

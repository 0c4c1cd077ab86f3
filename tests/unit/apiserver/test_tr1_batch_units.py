"""SPEC TR1 pure logic: when a resent batch's write counts as landed, the one timer busy
watch streams share, and which streams wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from skiff.api.kinds import lookup
from skiff.apiserver.endpoints.batch import contains
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache, WatchRequest, _Ticker


def test_tr1_stored_object_holding_what_was_sent_counts_as_landed() -> None:
    sent = {"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"},
            "spec": {"containers": [{"name": "c"}]}}
    stored = {"kind": "ConfigMap", "metadata": {"name": "a", "uid": "u1"},
              "data": {"k": "v"},
              "spec": {"containers": [{"name": "c", "imagePullPolicy": "Always"}]}}
    assert contains(stored, sent)  # defaults the server added aside
    assert not contains({**stored, "data": {"k": "other"}}, sent)
    assert not contains({**stored, "spec": {"containers": []}}, sent)
    assert not contains({**stored, "spec": {"containers": [{"name": "c"}, {"name": "d"}]}},
                        sent)
    assert not contains(None, sent)


async def test_tr1_busy_watchers_wake_together_and_one_leaving_leaves_the_others() -> None:
    ticker = _Ticker(0.02)
    loop = asyncio.get_running_loop()
    start = loop.time()
    woke: list[float] = []

    async def wait() -> None:
        await ticker.next()
        woke.append(loop.time())

    leaving = asyncio.ensure_future(ticker.next())
    waiters = [asyncio.ensure_future(wait()) for _ in range(3)]
    await asyncio.sleep(0)
    leaving.cancel()  # a watcher that ends mid-wait
    await asyncio.wait_for(asyncio.gather(*waiters), 2)
    assert len(woke) == 3 and max(woke) - min(woke) < 0.01
    assert min(woke) - start >= 0.015


async def test_tr1_only_a_clients_stream_waits_for_the_tick_the_apiservers_own_watch_does_not(
        ) -> None:
    """A busy client stream sends one frame per tick; the apiserver's own lookups (the
    ServiceAccount a token review reads right after its deletion) see each event at once."""
    store = MemoryStorage()
    cache = WatchCache(store, coalesce=0.3)
    runner = asyncio.create_task(cache.run())
    request = WatchRequest(lookup("configmaps"), "default", lambda _: True, selects_all=True)
    loop = asyncio.get_running_loop()
    try:
        await cache.ready()
        after = cache.revision

        async def put(name: str) -> None:
            await store.create(f"/registry/configmaps/default/{name}", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}})

        async def second_frame_delay(coalesce: bool) -> float:
            """Seconds between a write and its frame, right after the watcher sent one."""
            watch = cache.watch_batches(request, cache.revision, coalesce=coalesce)
            assert isinstance(watch, AsyncGenerator)
            first = asyncio.ensure_future(anext(watch))
            await put(f"a-{coalesce}")
            await asyncio.wait_for(first, 2)
            await put(f"b-{coalesce}")
            written = loop.time()
            frame = await asyncio.wait_for(anext(watch), 2)
            assert [e.object["metadata"]["name"] for e in frame] == [f"b-{coalesce}"]
            await watch.aclose()
            return loop.time() - written

        assert await second_frame_delay(coalesce=False) < 0.1
        assert await second_frame_delay(coalesce=True) >= 0.2
        assert cache.revision > after
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

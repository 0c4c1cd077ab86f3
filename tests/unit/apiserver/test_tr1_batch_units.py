"""SPEC TR1 pure logic: when a resent batch's write counts as landed, and the one timer
busy watch streams share."""

from __future__ import annotations

import asyncio

from skiff.apiserver.endpoints.batch import contains
from skiff.apiserver.storage.watchcache import _Ticker


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

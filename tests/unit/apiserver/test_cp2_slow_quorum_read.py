"""SPEC CP2 under overload: a watch cache whose quorum read is late while its etcd watch
still delivers new revisions keeps its watches open (etcd is slow, not cut off); once the
watch stops too, the watches close within the currency bound. Before the fix every late
read closed every watch, and at 10,000 hollow nodes every informer re-listed at once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator

from skiff.api import ApiError, Reason
from skiff.api.kinds import lookup
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache, WatchEvent, WatchRequest

TIMEOUT = 0.6  # --etcd-readycheck-timeout, compressed (commits come 30 times as often)
SLACK = 0.5  # a loaded CI machine's scheduling


class SlowQuorum(MemoryStorage):
    """etcd whose linearizable read never answers in time (overloaded or cut off); its
    watch goes on delivering whatever is written."""

    reads = 0

    async def quorum_revision(self, *, timeout: float) -> int:
        self.reads += 1
        await asyncio.sleep(timeout)
        raise ApiError(Reason.SERVICE_UNAVAILABLE,
                       f"etcd did not answer a quorum read within {timeout:g}s")


async def _put(store: MemoryStorage, name: str) -> None:
    await store.create(f"/registry/configmaps/default/{name}", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}})


async def test_cp2_a_late_quorum_read_while_etcd_commits_keeps_watches_open() -> None:
    store = SlowQuorum()
    verdicts: list[bool] = []

    async def on_currency(current: bool) -> None:
        verdicts.append(current)

    cache = WatchCache(store, quorum_check_timeout=TIMEOUT, on_currency=on_currency)
    runner = asyncio.create_task(cache.run())
    await cache.ready()
    watch = cache.watch_batches(WatchRequest(lookup("configmaps"), "default",
                                             lambda _: True, selects_all=True),
                                cache.revision)
    assert isinstance(watch, AsyncGenerator)
    seen: list[WatchEvent] = []
    closed: list[tuple[float, BaseException]] = []

    async def follow() -> None:
        try:
            async for batch in watch:
                seen.extend(e for e in batch if e.type != "BOOKMARK")
        except ApiError as err:
            closed.append((time.monotonic(), err))

    writes = 0
    stop = asyncio.Event()

    async def commit_steadily() -> None:
        nonlocal writes
        while not stop.is_set():
            await _put(store, f"cm-{writes}")
            writes += 1
            await asyncio.sleep(0.02)

    follower = asyncio.create_task(follow())
    writer = asyncio.create_task(commit_steadily())
    check = asyncio.create_task(cache.check_currency())
    try:
        await asyncio.sleep(4 * TIMEOUT)  # four late reads while etcd commits on
        assert store.reads >= 3
        assert not check.done() and not closed and cache.unavailable is None
        assert verdicts == []  # no verdict either way while it cannot tell
        stop.set()
        await writer
        stopped = time.monotonic()
        assert await asyncio.wait_for(check, 5 * TIMEOUT) is False
        await asyncio.wait_for(follower, 5 * TIMEOUT)
        assert len(seen) == writes  # every commit was delivered before the close
        assert verdicts == [False]
        assert closed and closed[0][1].reason == Reason.SERVICE_UNAVAILABLE  # type: ignore[attr-defined]
        # the watch stopped delivering: closed within 1.5 reads of the last commit
        assert closed[0][0] - stopped <= 1.5 * TIMEOUT + SLACK
    finally:
        for task in (writer, follower, check, runner):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(writer, follower, check, runner)


async def test_cp2_a_late_quorum_read_with_no_new_revisions_closes_watches_at_once() -> None:
    store = SlowQuorum()
    cache = WatchCache(store, quorum_check_timeout=TIMEOUT)
    runner = asyncio.create_task(cache.run())
    try:
        await cache.ready()
        await _put(store, "old")  # a commit well before the read: no evidence of life
        await asyncio.sleep(TIMEOUT)
        started = time.monotonic()
        assert await cache.check_currency() is False
        assert store.reads == 1
        assert time.monotonic() - started < TIMEOUT + SLACK
        assert cache.unavailable is not None
        assert cache.unavailable.reason == Reason.SERVICE_UNAVAILABLE
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner

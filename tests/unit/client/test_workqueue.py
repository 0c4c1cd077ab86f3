"""The controllers' rate-limited workqueue: client-go semantics, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from skiff.client.workqueue import ShutDown, WorkQueue
from skiff.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def queue(clock: FakeClock) -> AsyncIterator[WorkQueue[str]]:
    q: WorkQueue[str] = WorkQueue(name="test", clock=clock)
    yield q
    await asyncio.wait_for(q.shutdown_with_drain(), 1.0)
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not leftover, f"tasks left running: {leftover}"


async def settle() -> None:
    """Let woken tasks (the queue's timer) run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def drain_now(q: WorkQueue[str]) -> list[str]:
    """Everything queued right now, in order, each marked done."""
    items = []
    while len(q):
        item = await q.get()
        q.done(item)
        items.append(item)
    return items


async def get_nowait(q: WorkQueue[str]) -> str:
    return await asyncio.wait_for(q.get(), timeout=1.0)


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        pytest.param(["a", "a", "a"], ["a"], id="same-item-thrice"),
        pytest.param(["a", "b", "a", "c", "b"], ["a", "b", "c"], id="keeps-first-position"),
        pytest.param(["a", "b"], ["a", "b"], id="distinct-items-fifo"),
    ],
)
async def test_workqueue_dedups_items(
    queue: WorkQueue[str], adds: list[str], expected: list[str]
) -> None:
    for item in adds:
        queue.add(item)
    assert len(queue) == len(expected)
    got = []
    for _ in expected:
        item = await get_nowait(queue)
        got.append(item)
        queue.done(item)
    assert got == expected
    assert len(queue) == 0


@pytest.mark.parametrize(
    ("adds_while_processing", "requeued"),
    [
        pytest.param(0, False, id="not-added-again-not-requeued"),
        pytest.param(1, True, id="added-once-requeued-after-done"),
        pytest.param(3, True, id="added-thrice-requeued-once"),
    ],
)
async def test_workqueue_requeues_after_done(
    queue: WorkQueue[str], adds_while_processing: int, requeued: bool
) -> None:
    queue.add("a")
    item = await get_nowait(queue)
    for _ in range(adds_while_processing):
        queue.add("a")
    assert len(queue) == 0, "an item being processed must not be handed out again"
    queue.done(item)
    assert len(queue) == (1 if requeued else 0)
    if requeued:
        assert await get_nowait(queue) == "a"
        queue.done("a")


async def test_workqueue_never_gives_one_item_to_two_workers(queue: WorkQueue[str]) -> None:
    queue.add("a")
    first = await get_nowait(queue)
    queue.add("a")
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done()
    queue.done(first)
    assert await asyncio.wait_for(second, 1.0) == "a"
    queue.done("a")


async def test_workqueue_get_blocks_until_add(queue: WorkQueue[str]) -> None:
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("x")
    assert await asyncio.wait_for(getter, 1.0) == "x"
    queue.done("x")


@pytest.mark.parametrize(
    ("failures", "expected_delay"),
    [
        pytest.param(1, 0.005, id="first-5ms"),
        pytest.param(2, 0.010, id="second-10ms"),
        pytest.param(5, 0.080, id="fifth-80ms"),
        pytest.param(11, 5.12, id="eleventh-5.12s"),
    ],
)
async def test_workqueue_rate_limited_backoff_doubles(
    queue: WorkQueue[str], clock: FakeClock, failures: int, expected_delay: float
) -> None:
    for _ in range(failures - 1):
        queue.add_rate_limited("a")
        clock.advance(10_000)
        await settle()
        assert await get_nowait(queue) == "a"
        queue.done("a")
    assert queue.num_requeues("a") == failures - 1
    queue.add_rate_limited("a")
    clock.advance(expected_delay * 0.99)
    await settle()
    assert len(queue) == 0, "came out before its backoff"
    clock.advance(expected_delay * 0.02)
    await settle()
    assert len(queue) == 1, "not out after its backoff"
    assert queue.num_requeues("a") == failures


@pytest.mark.parametrize(
    ("max_delay", "failures", "expected_delay"),
    [
        pytest.param(1000.0, 40, 1000.0, id="default-cap-1000s"),
        pytest.param(0.5, 10, 0.5, id="custom-cap"),
    ],
)
async def test_workqueue_rate_limited_backoff_caps(
    clock: FakeClock, max_delay: float, failures: int, expected_delay: float
) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock, max_delay=max_delay)
    for _ in range(failures - 1):
        queue.add_rate_limited("a")
        clock.advance(10_000)
        await settle()
        assert await drain_now(queue) == ["a"]
    queue.add_rate_limited("a")
    clock.advance(expected_delay * 0.99)
    await settle()
    assert len(queue) == 0
    clock.advance(expected_delay * 0.02)
    await settle()
    assert len(queue) == 1
    await queue.shutdown_with_drain()


async def test_workqueue_forget_resets_backoff(queue: WorkQueue[str], clock: FakeClock) -> None:
    for _ in range(3):
        queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 3
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    clock.advance(1.0)
    await settle()
    await drain_now(queue)
    queue.add_rate_limited("a")
    clock.advance(0.005)
    await settle()
    assert len(queue) == 1, "after forget the first retry waits the base 5 ms again"


@pytest.mark.parametrize(
    ("burst", "qps", "items", "immediate"),
    [
        pytest.param(100, 10.0, 101, 100, id="default-burst-100"),
        pytest.param(2, 10.0, 4, 2, id="small-burst"),
    ],
)
async def test_workqueue_rate_limited_token_bucket(
    clock: FakeClock, burst: int, qps: float, items: int, immediate: int
) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock, burst=burst, qps=qps, base_delay=0.0)
    for i in range(items):
        queue.add_rate_limited(f"item-{i}")
    assert len(queue) == immediate, "the burst goes straight through"
    clock.advance(1 / qps)
    await settle()
    assert len(queue) == immediate + 1, "then one item per 1/qps"
    await queue.shutdown_with_drain()


async def test_workqueue_add_after_orders_by_deadline_and_wakes_for_sooner(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add_after("late", 10.0)
    await settle()
    queue.add_after("soon", 1.0)
    await settle()
    assert clock.sleepers == 1, "one timer sleeps until the earliest deadline"
    clock.advance(1.0)
    await settle()
    assert await drain_now(queue) == ["soon"]
    clock.advance(9.0)
    await settle()
    assert await drain_now(queue) == ["late"]
    assert clock.sleepers == 0, "the timer exits when nothing is waiting"


@pytest.mark.parametrize(
    ("first", "second", "out_at"),
    [
        pytest.param(5.0, 1.0, 1.0, id="sooner-deadline-wins"),
        pytest.param(1.0, 5.0, 1.0, id="later-deadline-ignored"),
    ],
)
async def test_workqueue_add_after_keeps_earliest_deadline(
    queue: WorkQueue[str], clock: FakeClock, first: float, second: float, out_at: float
) -> None:
    queue.add_after("a", first)
    queue.add_after("a", second)
    clock.advance(out_at)
    await settle()
    assert await drain_now(queue) == ["a"]
    clock.advance(10.0)
    await settle()
    assert len(queue) == 0, "an item waits on the heap at most once"


async def test_workqueue_add_after_zero_is_immediate(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0.0)
    assert len(queue) == 1


async def test_workqueue_shutdown_drains_then_raises(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add_after("delayed", 1.0)
    queue.shutdown()
    queue.add("ignored")
    assert await get_nowait(queue) == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await get_nowait(queue)


async def test_workqueue_shutdown_wakes_blocked_getters(queue: WorkQueue[str]) -> None:
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    queue.shutdown()
    for getter in getters:
        with pytest.raises(ShutDown):
            await asyncio.wait_for(getter, 1.0)


async def test_workqueue_cancelled_getter_does_not_lose_item(queue: WorkQueue[str]) -> None:
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await asyncio.wait_for(second, 1.0) == "a"
    queue.done("a")
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_workqueue_shutdown_with_drain_waits_for_processing(
    queue: WorkQueue[str],
) -> None:
    queue.add("a")
    item = await get_nowait(queue)
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    assert not drain.done(), "must wait for the item being processed"
    queue.done(item)
    await asyncio.wait_for(drain, 1.0)

"""The one controller worker loop: forget on success, requeue-after on request, rate-limited
requeue (after telling `on_error`) on any exception, and return once the queue shuts down."""

from __future__ import annotations

import asyncio

from skiff.client.worker import run_worker
from skiff.client.workqueue import WorkQueue
from skiff.clock import FakeClock


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_failure_is_reported_then_retried_with_backoff_and_success_forgets() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="t", clock=clock)
    calls: list[str] = []
    errors: list[tuple[str, str, int]] = []

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return None

    def on_error(key: str, err: Exception) -> None:
        errors.append((key, str(err), queue.num_requeues(key)))

    worker = asyncio.create_task(run_worker(queue, reconcile, on_error=on_error))
    queue.add("a")
    await settle()
    assert calls == ["a"] and errors == [("a", "boom", 0)]
    clock.advance(0.005)
    await settle()
    assert calls == ["a", "a"] and queue.num_requeues("a") == 0
    await queue.shutdown_with_drain()
    await asyncio.wait_for(worker, 1.0)


async def test_a_reconcile_can_ask_to_be_called_again_later() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="t", clock=clock)
    calls: list[str] = []

    async def reconcile(key: str) -> float | None:
        calls.append(key)
        return 10.0

    worker = asyncio.create_task(run_worker(queue, reconcile, on_error=lambda k, e: None))
    queue.add("a")
    await settle()
    clock.advance(9.9)
    await settle()
    assert calls == ["a"]
    clock.advance(0.1)
    await settle()
    assert calls == ["a", "a"]
    await queue.shutdown_with_drain()
    await asyncio.wait_for(worker, 1.0)

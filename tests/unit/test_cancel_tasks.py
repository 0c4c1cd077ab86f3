"""Clean shutdown: a task that loses a cancellation is cancelled again (skiff.tasks).

Python 3.11's `asyncio.wait_for` can drop a cancellation that arrives as the awaited
thing completes; an apiserver then hung on SIGTERM. The stand-in below drops the first
cancellation the same way and then waits for something that never comes.
"""

from __future__ import annotations

import asyncio

from skiff.tasks import cancel_tasks


async def _drops_one_cancellation(started: asyncio.Event) -> None:
    never = asyncio.Event()
    started.set()
    try:
        await never.wait()
    except asyncio.CancelledError:
        pass  # what a lost cancellation looks like from outside: the task goes on
    await never.wait()


async def test_a_task_that_lost_a_cancellation_is_still_stopped() -> None:
    started = asyncio.Event()
    stubborn = asyncio.create_task(_drops_one_cancellation(started))
    plain = asyncio.create_task(asyncio.sleep(3600))
    await started.wait()
    await asyncio.wait_for(cancel_tasks(stubborn, plain, every=0.05), 5)
    assert stubborn.cancelled() and plain.cancelled()


async def test_finished_and_failed_tasks_are_left_as_they_are() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    done = asyncio.create_task(asyncio.sleep(0))
    failed = asyncio.create_task(fails())
    await asyncio.sleep(0.01)
    await cancel_tasks(done, failed)
    assert not done.cancelled() and isinstance(failed.exception(), ValueError)

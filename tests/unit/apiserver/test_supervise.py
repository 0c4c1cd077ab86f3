"""SPEC AU10: a background loop of the apiserver outlives its errors and still stops when
cancelled."""

from __future__ import annotations

import asyncio

import pytest

from skiff.api.errors import ApiError, Reason
from skiff.apiserver.storage.values import NO_SPACE
from skiff.apiserver.supervise import supervised


async def test_au10_a_failing_background_loop_is_restarted_not_fatal() -> None:
    runs: list[int] = []

    async def loop() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise ApiError(Reason.INTERNAL_ERROR, NO_SPACE)
        if len(runs) == 2:
            raise OSError("connection reset")

    await asyncio.wait_for(supervised("test", loop, max_backoff=0.01), 5)
    assert runs == [0, 1, 2]


async def test_au10_a_supervised_loop_stops_when_cancelled() -> None:
    started = asyncio.Event()

    async def loop() -> None:
        started.set()
        await asyncio.sleep(3600)

    task = asyncio.create_task(supervised("test", loop))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

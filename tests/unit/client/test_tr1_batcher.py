"""SPEC TR1, the client side: a Batcher sends N items or what T seconds gathered, whichever
comes first, and hands each caller its own item's answer."""

from __future__ import annotations

import asyncio

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.batch import Batcher, batching


class Recorder:
    """A `send` that answers item i with {"ok": {"i": i}}, or the error it is told to."""

    def __init__(self, fail_item: int | None = None, fail_all: Exception | None = None) -> None:
        self.sent: list[list[Obj]] = []
        self.fail_item = fail_item
        self.fail_all = fail_all

    async def __call__(self, items: list[Obj]) -> list[Obj]:
        self.sent.append(items)
        if self.fail_all is not None:
            raise self.fail_all
        return [{"error": ApiError.conflict("configmaps", "x", "stale").to_status()}
                if item["i"] == self.fail_item else {"ok": {"i": item["i"]}}
                for item in items]


async def test_tr1_batcher_sends_max_items_at_once_without_waiting() -> None:
    send = Recorder()
    batcher = Batcher(send, max_items=4, max_delay=60.0)
    answers = await asyncio.wait_for(
        asyncio.gather(*(batcher.submit({"i": i}) for i in range(8))), 5)
    assert answers == [{"i": i} for i in range(8)]
    assert [[item["i"] for item in batch] for batch in send.sent] == [[0, 1, 2, 3],
                                                                       [4, 5, 6, 7]]


async def test_tr1_batcher_sends_what_max_delay_gathered() -> None:
    send = Recorder()
    batcher = Batcher(send, max_items=100, max_delay=0.05)
    first = asyncio.ensure_future(batcher.submit({"i": 0}))
    await asyncio.sleep(0)
    assert send.sent == []  # waiting for company
    second = asyncio.ensure_future(batcher.submit({"i": 1}))
    assert list(await asyncio.wait_for(asyncio.gather(first, second), 5)) == [{"i": 0},
                                                                              {"i": 1}]
    assert len(send.sent) == 1 and batcher.batches == 1 and batcher.items == 2


async def test_tr1_batcher_gives_each_caller_its_own_error() -> None:
    batcher = Batcher(Recorder(fail_item=1), max_items=3, max_delay=1.0)
    results = await asyncio.gather(*(batcher.submit({"i": i}) for i in range(3)),
                                   return_exceptions=True)
    assert results[0] == {"i": 0} and results[2] == {"i": 2}
    error = results[1]
    assert isinstance(error, ApiError) and error.reason == Reason.CONFLICT


async def test_tr1_batcher_failed_batch_reaches_every_caller() -> None:
    down = ApiError(Reason.SERVICE_UNAVAILABLE, "the apiserver is unavailable")
    batcher = Batcher(Recorder(fail_all=down), max_items=2, max_delay=1.0)
    results = await asyncio.gather(batcher.submit({"i": 0}), batcher.submit({"i": 1}),
                                   return_exceptions=True)
    assert all(isinstance(r, ApiError) and r.reason == Reason.SERVICE_UNAVAILABLE
               for r in results)


async def test_tr1_batcher_close_sends_what_waits() -> None:
    send = Recorder()
    batcher = Batcher(send, max_items=100, max_delay=60.0)
    waiting = asyncio.ensure_future(batcher.submit({"i": 7}))
    await asyncio.sleep(0)
    await batcher.close()
    assert await waiting == {"i": 7}


def test_tr1_batching_settings_turn_batching_off_at_zero() -> None:
    assert batching(0, 0.01)["batch"] is False
    assert batching(100, 0.01) == {"batch": True, "batch_items": 100, "batch_delay": 0.01}
    with pytest.raises(ValueError, match="max_items"):
        Batcher(Recorder(), max_items=0)

"""Clean shutdown on SIGTERM (skiff.service): a service told to stop while it is still
starting stops at once; one that reported ready drains in its own time.

A kubelet, fence agent or scheduler whose apiserver did not answer sat in its start-up
retries and ignored SIGTERM until they gave up (30 s and more). `serve` turns the signal
into `service.stop`, as its handler does here.
"""

from __future__ import annotations

import asyncio

from skiff.service import Service, serve


async def test_a_service_told_to_stop_while_starting_stops_at_once() -> None:
    cleaned = asyncio.Event()

    async def body(service: Service) -> None:
        asyncio.get_running_loop().call_later(0.05, service.stop.set)  # SIGTERM
        try:
            await asyncio.Event().wait()  # an apiserver that never answers
        finally:
            cleaned.set()

    await asyncio.wait_for(serve("test", body), 5)
    assert cleaned.is_set()


async def test_a_ready_service_drains_in_its_own_time_on_stop() -> None:
    drained = asyncio.Event()

    async def body(service: Service) -> None:
        await service.ready()
        asyncio.get_running_loop().call_later(0.05, service.stop.set)
        await service.stop.wait()
        await asyncio.sleep(0.2)  # its own shutdown work, not cut short
        drained.set()

    await asyncio.wait_for(serve("test", body), 5)
    assert drained.is_set()


async def test_a_body_that_fails_while_starting_still_fails() -> None:
    async def body(service: Service) -> None:
        raise RuntimeError("bad flag")

    try:
        await serve("test", body)
    except RuntimeError as err:
        assert str(err) == "bad flag"
    else:
        raise AssertionError("the body's error was swallowed")

"""Issue 37: the scheduler asks the apiserver to coalesce its watch streams (its cache is
assume-based, so a tick's lag costs it nothing but that tick), and does not when told
`--coalesced-watches=false`; the watches it asks for are otherwise unchanged."""

from __future__ import annotations

import asyncio

from skiff.client.fake import FakeClient
from skiff.scheduler.config import load_config
from skiff.scheduler.scheduler import Scheduler
from skiff.scheduler.settings import parse_settings


async def _watches(argv: list[str]) -> dict[str, bool]:
    client = FakeClient()
    scheduler = Scheduler(client=client, settings=parse_settings(argv),
                          config=load_config(""))
    informers = [scheduler.pods, scheduler.nodes]
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.wait_for(asyncio.gather(*(i.wait_synced() for i in informers)), 5)
        for _ in range(50):
            watches = {a.resource: bool(a.options["coalesce"]) for a in client.actions
                       if a.verb == "watch"}
            if len(watches) == len(informers):
                return watches
            await asyncio.sleep(0.01)
        raise AssertionError(f"the informers did not watch: {client.actions}")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_issue37_the_scheduler_asks_for_coalesced_watches_by_default() -> None:
    assert await _watches([]) == {"pods": True, "nodes": True}


async def test_issue37_coalesced_watches_can_be_turned_off() -> None:
    assert await _watches(["--coalesced-watches=false"]) == {"pods": False, "nodes": False}

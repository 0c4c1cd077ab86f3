"""One perturbed watcher's stream: the watch cache's batches, passed through its
`HeldEvents` (events.py) under the rules that target its user now.

The cache's stream is read by a task of its own into a queue, so held events can leave
when the view advances or a coalescing delay ends even if nothing new arrives; the rules
are looked up again at each wake-up (at least every `TICK`), so a changed Perturbation
applies at once. Only this watcher waits: the cache and every other watcher go on.

When the rules are gone (the Perturbation deleted), every held event leaves in order; a
watch that missed events then ends with 410 Gone, so its client lists again (an informer
re-lists on Gone, and client-go's relist tells its handlers about changed and deleted
objects) and converges: a missed event delays the truth, it never hides it for good.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from skiff.api import ApiError
from skiff.api.kinds import KindInfo
from skiff.apiserver.perturbation.events import HeldEvents, Note
from skiff.apiserver.perturbation.rules import Effective
from skiff.apiserver.storage.watchcache import WatchEvent
from skiff.auth import UserInfo

TICK = 0.1

_Item = list[WatchEvent] | Exception | None


class Views(Protocol):
    """What the wrapper asks of the table."""

    def for_user(self, user: UserInfo | None) -> Effective | None: ...

    def view(self, effective: Effective) -> int: ...


async def _pump(source: AsyncIterator[list[WatchEvent]], queue: asyncio.Queue[_Item]) -> None:
    try:
        async for batch in source:
            queue.put_nowait(batch)
    except Exception as err:  # the watch's own failure, raised to the client in order
        queue.put_nowait(err)
        return
    queue.put_nowait(None)


async def perturbed_watch(table: Views, user: UserInfo, info: KindInfo,
                          source: AsyncIterator[list[WatchEvent]], note: Note | None = None
                          ) -> AsyncIterator[list[WatchEvent]]:
    """`source` as `user` is to see it (see the module doc); `note` hears what is missed,
    held or coalesced (events.py)."""
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    pump = asyncio.create_task(_pump(source, queue), name=f"perturbed-watch-{user.name}")
    held = HeldEvents(info, note)
    missed_ever = False
    loop = asyncio.get_running_loop()
    try:
        while True:
            item: _Item
            try:
                async with asyncio.timeout(TICK):
                    item = await queue.get()
            except TimeoutError:
                item = []
            effective = table.for_user(user)
            if effective is not None and not (effective.stale or effective.missed):
                effective = None  # what is left (a record, a crash) does not touch watches
            if effective is None:
                out = held.release_all()
                if isinstance(item, list):
                    out.extend(item)
                if out:
                    yield out
                if missed_ever:
                    # healed: what this watch missed is not in its client's view, and a
                    # watch from its last resourceVersion would not bring it back (a later
                    # event or bookmark may be past it): 410 Gone makes it list again, as
                    # after a real gap, so the final state is never a lie
                    raise ApiError.gone(
                        "the watch missed events (a Perturbation, now healed): list again "
                        "and watch from the list's resourceVersion")
            else:
                missed_ever = missed_ever or bool(effective.missed)
                view, now = table.view(effective), loop.time()
                if isinstance(item, list):
                    for ev in item:
                        held.admit(ev, effective, view=view, now=now)
                out = held.release(view=view, now=now)
                if out:
                    yield out
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()

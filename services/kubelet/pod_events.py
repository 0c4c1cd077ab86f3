"""A pod's Events, written one after another in the order its worker records them.

A repeat (an Unhealthy per failed probe, a BackOff per declined restart) then always finds
the first one written and is counted on it by the recorder, never created twice because
both were in flight at once. Before the worker ends, what is still being written gets a
bounded time to reach the apiserver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from skiff.api.types import Obj
from skiff.client import EventRecorder

__all__ = ["EventSink", "PodEvents"]

# (type, reason, message): an Event on the pod, as its worker's helpers record one
EventSink = Callable[[str, str, str], None]


class PodEvents:
    def __init__(self, *, recorder: EventRecorder, uid: str) -> None:
        self._recorder = recorder
        self._uid = uid
        self._pending: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None  # the Event written last

    def record(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        """Record an Event on `pod`, after the ones recorded before it."""
        previous = self._last

        async def write() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait({previous})
            await self._recorder.event(pod, type_, reason, message)

        task = asyncio.create_task(write(), name=f"event:{reason}:{self._uid}")
        self._last = task
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self, timeout: float = 5.0) -> None:
        """Let the Events still being written reach the apiserver (bounded, so a lost
        apiserver cannot hold the worker up); cancel what is left."""
        if self._pending:
            _, pending = await asyncio.wait(set(self._pending), timeout=timeout)
            for task in pending:
                task.cancel()

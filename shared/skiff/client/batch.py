"""Writes that wait a moment to share one message (issue 37).

One grpcio call costs the caller and the apiserver as much CPU as the apiserver's whole
handling of a small write, so a busy writer (the scheduler binding hundreds of pods a
second, a kubelet with many pods) pays the transport once per batch instead of once per
object. A `Batcher` collects the writes its callers make and sends them as one `Batch` call
(the apiserver's endpoints.batch) when it holds `max_items` of them or `max_delay` seconds
after the first, whichever comes first. Each caller still awaits its own write's answer —
the object written or the ApiError it alone got — so code that writes through a batching
client reads exactly as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from skiff.api.errors import ApiError
from skiff.api.types import Obj

# Kubernetes' own clients wait this long at most to coalesce (the event broadcaster's
# sink batches per second; a binding waits for no one): short enough to go unnoticed.
DEFAULT_MAX_ITEMS: Final = 100
DEFAULT_MAX_DELAY: Final = 0.01

Send = Callable[[list[Obj]], Awaitable[list[Obj]]]


def batching(size: int, delay: float) -> dict[str, Any]:
    """ApiClient keyword arguments from a service's `--write-batch-size` (0 = a call per
    write) and `--write-batch-delay`."""
    return {"batch": size > 0, "batch_items": max(size, 1), "batch_delay": max(delay, 0.0)}


class Batcher:
    """`await batcher.submit({"method": "Bind", ...})` → that item's answer.

    `send` delivers a list of items and returns one result per item
    (`{"ok": answer}` or `{"error": Status}`), resending them itself across a failover."""

    def __init__(self, send: Send, *, max_items: int = DEFAULT_MAX_ITEMS,
                 max_delay: float = DEFAULT_MAX_DELAY) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self._send = send
        self.max_items = max_items
        self.max_delay = max_delay
        self._pending: list[tuple[Obj, asyncio.Future[Obj]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self.batches = 0  # sent so far (for benches and tests)
        self.items = 0

    async def submit(self, item: Obj) -> Obj:
        future: asyncio.Future[Obj] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_items:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_delay, self.flush)
        return await future

    def flush(self) -> None:
        """Send what is waiting now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._deliver(batch))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _deliver(self, batch: list[tuple[Obj, asyncio.Future[Obj]]]) -> None:
        self.batches += 1
        self.items += len(batch)
        try:
            results = await self._send([item for item, _ in batch])
        except BaseException as err:  # the batch as a whole failed: every caller hears it
            for _, future in batch:
                if not future.done():
                    future.set_exception(err if isinstance(err, Exception)
                                         else asyncio.CancelledError())
            if not isinstance(err, Exception):
                raise
            return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller was cancelled; the write still happened
                continue
            if "error" in result:
                future.set_exception(ApiError.from_status(result["error"]))
            else:
                future.set_result(result.get("ok") or {})

    async def close(self) -> None:
        """Send what is waiting and wait for every batch in flight."""
        self.flush()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

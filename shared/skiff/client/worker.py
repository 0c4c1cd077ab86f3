"""The controller worker loop, as client-go's `processNextWorkItem`: one place for every
controller (controller-manager's and the fence agent's).

A worker takes a key from the `WorkQueue`, reconciles it, and then either `forget`s it
(success; a reconcile may also ask to be called again after a delay) or requeues it with
rate limiting (any exception, reported through `on_error` first so the log line can say how
often it was requeued). It always marks the key `done`, and returns once the queue is shut
down and drained.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

from skiff.client.workqueue import ShutDown, WorkQueue

__all__ = ["run_worker"]

K = TypeVar("K", bound=Hashable)

async def run_worker(queue: WorkQueue[K], reconcile: Callable[[K], Awaitable[float | None]],
                     *, on_error: Callable[[K, Exception], None]) -> None:
    """Process keys from `queue` until it shuts down. `reconcile(key)` returns None, or the
    seconds after which to look at the key again."""
    while True:
        try:
            key = await queue.get()
        except ShutDown:
            return
        try:
            after = await reconcile(key)
        except Exception as err:
            on_error(key, err)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            if after is not None:
                queue.add_after(key, max(after, 0.0))
        finally:
            queue.done(key)

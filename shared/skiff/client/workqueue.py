"""The rate-limited workqueue controllers pull keys from, as client-go's `workqueue`.

Event handlers only `add` keys (`namespace/name`); workers `get` a key, reconcile it, then
`forget` it on success or `add_rate_limited` it on error, and always call `done`. The queue
keeps client-go's guarantees:

- an item is queued at most once (the *dirty* set), however often it is added;
- an item being processed is never handed to a second worker: if it is added again meanwhile
  it is queued once more only when `done` is called;
- `add_after` holds items on a heap served by a single timer task that sleeps on the injected
  clock until the earliest deadline (and is restarted when a sooner one arrives);
- `add_rate_limited` waits the larger of a per-item exponential backoff (5 ms doubling to
  1000 s) and an overall token bucket (10 qps, burst 100): client-go's
  `DefaultControllerRateLimiter`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from skiff.clock import REAL_CLOCK, Clock

__all__ = ["BucketRateLimiter", "ItemExponentialRateLimiter", "ShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """Raised by `WorkQueue.get` once the queue is shut down and drained."""


class ItemExponentialRateLimiter(Generic[T]):
    """Per-item backoff: `base_delay * 2**failures`, capped at `max_delay`."""

    def __init__(self, *, base_delay: float, max_delay: float) -> None:
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        if failures >= 64:  # 2**64 * base overflows any sane maximum
            return self._max_delay
        return min(self._base_delay * 2.0**failures, self._max_delay)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)


class BucketRateLimiter:
    """Overall token bucket (golang.org/x/time/rate): `qps` refill, `burst` capacity.

    Each call reserves one token; when none is left the caller is told how long until its
    reservation is due, so tokens may go negative as reservations queue up.
    """

    def __init__(self, *, qps: float, burst: int, clock: Clock) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    def when(self) -> float:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps


class WorkQueue(Generic[T]):
    """A deduplicating, delaying, rate-limited FIFO of items for controller workers."""

    def __init__(
        self,
        *,
        name: str = "",
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        qps: float = 10.0,
        burst: int = 100,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.name = name
        self._clock = clock
        self._item_limiter: ItemExponentialRateLimiter[T] = ItemExponentialRateLimiter(
            base_delay=base_delay, max_delay=max_delay
        )
        self._bucket_limiter = BucketRateLimiter(qps=qps, burst=burst, clock=clock)

        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._drained: asyncio.Event | None = None

        # Delayed items: heap of (deadline, seq, item); `_waiting` holds each item's live entry
        # so a later, later-deadline add_after is ignored and stale heap rows are skipped.
        self._seq = itertools.count()
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int]] = {}
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline = 0.0

    # -- the basic queue -------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Queue `item` unless it is already queued; if it is being processed, after `done`."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        self._wake_one_getter()

    async def get(self) -> T:
        """Wait for an item and mark it as being processed; call `done(item)` afterwards.

        Raises `ShutDown` once the queue is shut down and every queued item was handed out.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(f"workqueue {self.name!r} is shut down")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one_getter()  # pass our wake-up on; don't lose the item
                raise
            finally:
                if waiter in self._getters:
                    self._getters.remove(waiter)
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: T) -> None:
        """Mark `item` as processed; if it was added meanwhile, queue it again now."""
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one_getter()
        if not self._processing and self._drained is not None:
            self._drained.set()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shutdown(self) -> None:
        """Stop accepting items, drop delayed ones and wake waiting `get`s. Idempotent.

        Items already queued are still handed out; `get` raises `ShutDown` after that.
        """
        self._shutting_down = True
        self._heap.clear()
        self._waiting.clear()
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._getters:
            if not waiter.done():
                waiter.set_result(None)

    async def shutdown_with_drain(self) -> None:
        """`shutdown()`, then wait until no item is being processed and the timer is gone."""
        self.shutdown()
        timer, self._timer = self._timer, None
        if timer is not None:
            await asyncio.gather(timer, return_exceptions=True)
        if self._processing:
            self._drained = asyncio.Event()
            await self._drained.wait()

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # -- delaying --------------------------------------------------------------------------

    def add_after(self, item: T, delay: float) -> None:
        """Queue `item` after `delay` seconds; an earlier pending deadline for it wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        deadline = self._clock.monotonic() + delay
        pending = self._waiting.get(item)
        if pending is not None and pending[0] <= deadline:
            return
        seq = next(self._seq)
        self._waiting[item] = (deadline, seq)
        heapq.heappush(self._heap, (deadline, seq, item))
        if self._timer is None or deadline < self._timer_deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_deadline = deadline
            self._timer = asyncio.get_running_loop().create_task(
                self._run_timer(), name=f"workqueue-timer:{self.name}"
            )

    async def _run_timer(self) -> None:
        """Move due items into the queue; sleep until the next deadline; exit when none."""
        try:
            while True:
                now = self._clock.monotonic()
                while self._heap and (self._heap[0][0] <= now or not self._is_live(0)):
                    deadline, seq, item = heapq.heappop(self._heap)
                    if self._waiting.get(item) == (deadline, seq):  # else a superseded row
                        del self._waiting[item]
                        self.add(item)
                if not self._heap or self._shutting_down:
                    return
                self._timer_deadline = self._heap[0][0]
                await self._clock.sleep(self._timer_deadline - now)
        finally:
            if self._timer is asyncio.current_task():
                self._timer = None

    def _is_live(self, index: int) -> bool:
        deadline, seq, item = self._heap[index]
        return self._waiting.get(item) == (deadline, seq)

    # -- rate limiting ---------------------------------------------------------------------

    def add_rate_limited(self, item: T) -> None:
        """Queue `item` after max(its exponential backoff, the overall token bucket's delay)."""
        delay = max(self._item_limiter.when(item), self._bucket_limiter.when())
        self.add_after(item, delay)

    def forget(self, item: T) -> None:
        """Stop tracking `item`'s failures (call after a successful reconcile)."""
        self._item_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times `item` was `add_rate_limited` since it was last forgotten."""
        return self._item_limiter.num_requeues(item)

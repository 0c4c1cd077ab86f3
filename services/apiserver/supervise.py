"""Background tasks of the apiserver that outlive etcd errors (SPEC AU10).

The apiserver runs its loops (watch cache, admission lookups, allocator repair, the
`kubernetes` Service's endpoints, compaction) in one TaskGroup: one loop raising would
cancel the others and end the process, so an etcd out of space or briefly unreachable would
take the whole API down with it (reads included). `supervised` runs a loop again after any
error, logged as one line, with tenacity's exponential backoff; only cancellation ends it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import tenacity

from skiff.api.errors import ApiError

__all__ = ["supervised"]

log = logging.getLogger(__name__)


def _describe(err: BaseException | None) -> str:
    if isinstance(err, ApiError):
        return err.message
    return f"{type(err).__name__}: {err}" if err is not None else ""


async def supervised(name: str, loop: Callable[[], Awaitable[None]], *,
                     max_backoff: float = 30.0) -> None:
    """Run `loop()` until it returns or is cancelled, restarting it after any exception
    with a backoff growing from 0.1 s to `max_backoff`."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        outcome = state.outcome
        log.warning("background task failed; restarting it", extra={
            "task": name, "error": _describe(outcome.exception() if outcome else None),
            "retryIn": round(state.upcoming_sleep, 2)})

    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(Exception),
        wait=tenacity.wait_exponential(multiplier=0.1, max=max_backoff),
        stop=tenacity.stop_never, before_sleep=before_sleep, reraise=True)
    async for attempt in retrying:
        with attempt:
            await loop()

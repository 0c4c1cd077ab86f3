"""Read-modify-write that survives concurrent writers: client-go's `retry.RetryOnConflict`.

Skiff's gRPC API has no patch verb, so a client that edits part of an object (the CLI's
`label`, `apply` of an existing object) reads it, changes its copy and writes it back with
the resourceVersion it read. A kubelet heartbeat or a controller's status write landing in
between makes that write a 409 Conflict, where kubectl's patch would not have failed: the
edit is redone on a fresh read, with client-go's backoff (DefaultRetry: 5 steps from 10 ms).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import tenacity

from skiff.api import ApiError, Reason

T = TypeVar("T")

ATTEMPTS = 5


def _is_conflict(err: BaseException) -> bool:
    return isinstance(err, ApiError) and err.reason == Reason.CONFLICT


async def retry_on_conflict(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()` (read, change, write) again while its write answers Conflict."""
    async for step in tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(_is_conflict),
            wait=tenacity.wait_exponential(multiplier=0.01, max=1.0),
            stop=tenacity.stop_after_attempt(ATTEMPTS), reraise=True):
        with step:
            return await attempt()
    raise AssertionError("unreachable: tenacity reraises the last Conflict")

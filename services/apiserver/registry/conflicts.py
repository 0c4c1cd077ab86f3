"""Compare-and-swap conflicts in the registry: a write that lost a race to another writer
is read again and retried (when the client asked for no particular resourceVersion), up
to a bound; a leader-fencing refusal is a Conflict that retrying cannot cure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from skiff.api import ApiError, Reason
from skiff.apiserver.storage.values import LeaderFenced

T = TypeVar("T")


def lost_race(err: ApiError) -> bool:
    """A compare-and-swap Conflict (read again and retry), not a leader-fencing refusal."""
    return err.reason == Reason.CONFLICT and not isinstance(err, LeaderFenced)


class Retry(Exception):
    """A compare-and-swap lost to a concurrent writer; read again and retry."""


async def retry_conflicts(fn: Callable[[], Awaitable[T]], *, attempts: int) -> T:
    """Re-run a read-modify-write that lost a race (`fn` raises `Retry`)."""
    for _ in range(attempts):
        try:
            return await fn()
        except Retry:
            continue
    raise ApiError(Reason.CONFLICT, "too many concurrent writers; try again")

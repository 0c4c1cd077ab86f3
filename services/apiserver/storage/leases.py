"""etcd leases for objects that expire (Events after `--event-ttl`), granted sparingly.

kube-apiserver attaches every write of an Event to an etcd lease of the TTL, so etcd itself
deletes the Event that long after its last write (and every watcher sees it DELETED).
Granting a lease is a raft write of its own, so one lease is shared by the writes whose
expiry falls within a short reuse window after it: each lease is granted for the TTL plus
that window (the smaller of 60 s and 5 % of the TTL), and reused while it still has at
least the TTL left. An object therefore lives between TTL and TTL + window after its last
write — kube's leaseManager, whose semantics (not code) this follows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

REUSE_SECONDS = 60
REUSE_PERCENT = 0.05


class LeaseReuse:
    """`await leases.lease(ttl)` → the id of a lease with at least `ttl` seconds left."""

    def __init__(self, grant: Callable[[int], Awaitable[int]], *,
                 clock: Callable[[], float] = time.monotonic,
                 reuse_seconds: int = REUSE_SECONDS,
                 reuse_percent: float = REUSE_PERCENT) -> None:
        self._grant = grant
        self._clock = clock
        self._reuse_seconds = reuse_seconds
        self._reuse_percent = reuse_percent
        self._lock = asyncio.Lock()  # one grant at a time: a burst shares its lease
        self._id = 0
        self._expires = 0.0

    def _window(self, ttl: int) -> int:
        return min(self._reuse_seconds, int(self._reuse_percent * ttl))

    async def lease(self, ttl: int) -> int:
        async with self._lock:
            now = self._clock()
            window = self._window(ttl)
            if self._id and now + ttl < self._expires <= now + ttl + window:
                return self._id
            lease_id = await self._grant(ttl + window)
            self._id, self._expires = lease_id, now + ttl + window
            return lease_id

    def forget(self, lease_id: int) -> None:
        """etcd no longer has `lease_id` (revoked, or a restored member): never reuse it."""
        if self._id == lease_id:
            self._id, self._expires = 0, 0.0

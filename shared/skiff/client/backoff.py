"""Exponential backoff by key, as Kubernetes' `flowcontrol.Backoff`.

The kubelet keeps one of these for restarting crashed containers (LC3, CrashLoopBackOff:
10 s doubling to 300 s, reset after 600 s of running cleanly) and controllers use it for
per-object retries. Each key remembers its current delay and when `next()` last ran; an entry
idle longer than `reset_after` (by default twice the maximum, as in Kubernetes) starts again
from `initial`. Time is wall time from the injected clock, so `in_backoff_since` can be
compared with timestamps such as a container's `finishedAt`.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from skiff.clock import REAL_CLOCK, Clock

__all__ = ["Backoff"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry:
    delay: float
    last_update: float


class Backoff(Generic[K]):
    """Per-key exponential backoff: `initial`, doubling, capped at `maximum`."""

    def __init__(
        self,
        *,
        initial: float,
        maximum: float,
        reset_after: float | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(
                f"Backoff: need 0 < initial <= maximum, got initial={initial} maximum={maximum}"
            )
        self._initial = initial
        self._maximum = maximum
        self._reset_after = 2 * maximum if reset_after is None else reset_after
        self._clock = clock
        self._entries: dict[K, _Entry] = {}

    def next(self, key: K) -> float:
        """Record a failure of `key` and return how long to wait before trying again."""
        now = self._clock.now()
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, now):
            entry = _Entry(delay=self._initial, last_update=now)
            self._entries[key] = entry
        else:
            entry.delay = min(entry.delay * 2, self._maximum)
            entry.last_update = now
        return entry.delay

    def get(self, key: K) -> float:
        """The delay `key` is currently waiting out, or 0 when it has none."""
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, self._clock.now()):
            return 0.0
        return entry.delay

    def in_backoff_since(self, key: K, event_time: float) -> bool:
        """Whether `key` should still wait, counting its delay from `event_time` (wall time)."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        now = self._clock.now()
        if self._expired(entry, now):
            return False
        return now - event_time < entry.delay

    def reset(self, key: K) -> None:
        """Forget `key`: its next failure waits `initial` again."""
        self._entries.pop(key, None)

    def gc(self, now: float | None = None) -> None:
        """Drop entries idle longer than `reset_after` (they would start again anyway)."""
        at = self._clock.now() if now is None else now
        for key in [k for k, entry in self._entries.items() if self._expired(entry, at)]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)

    def _expired(self, entry: _Entry, now: float) -> bool:
        return now - entry.last_update > self._reset_after

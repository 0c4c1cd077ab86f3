"""Controller expectations (client-go `ControllerExpectations`), so a controller does not
act twice on one decision.

After a ReplicaSet creates 3 pods it must not create 3 more merely because its cache has not
seen them yet. It records what it expects (creations as a count, deletions by pod key); the
informer handlers lower the expectations as the changes are observed; the controller only
manages replicas again once they are met, or after `ttl` (5 minutes, as Kubernetes) in case
a watch event was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skiff.clock import REAL_CLOCK, Clock

EXPECTATIONS_TTL = 300.0


@dataclass
class _Expected:
    adds: int
    deletes: set[str]
    at: float


@dataclass
class Expectations:
    ttl: float = EXPECTATIONS_TTL
    clock: Clock = REAL_CLOCK
    _by_key: dict[str, _Expected] = field(default_factory=dict)

    def satisfied(self, key: str) -> bool:
        exp = self._by_key.get(key)
        if exp is None:
            return True
        if exp.adds <= 0 and not exp.deletes:
            return True
        return self.clock.monotonic() - exp.at > self.ttl

    def expect(self, key: str, *, adds: int = 0, deletes: set[str] | None = None) -> None:
        self._by_key[key] = _Expected(adds, set(deletes or ()), self.clock.monotonic())

    def creation_observed(self, key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.deletes.discard(pod_key)

    def lower(self, key: str, *, adds: int = 0, deleted: str | None = None) -> None:
        """A create/delete we expected did not happen (it failed)."""
        exp = self._by_key.get(key)
        if exp is None:
            return
        exp.adds -= adds
        if deleted is not None:
            exp.deletes.discard(deleted)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)


def slow_start_batches(count: int, *, initial: int = 1) -> list[int]:
    """Batch sizes 1, 2, 4, ... summing to `count` (Kubernetes' slowStartBatch)."""
    batches, size, left = [], max(1, initial), count
    while left > 0:
        batch = min(size, left)
        batches.append(batch)
        left -= batch
        size *= 2
    return batches

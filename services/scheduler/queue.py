"""The scheduling queue (SPEC PP3, LC9; Kubernetes' `internal/queue.PriorityQueue`).

- activeQ: pods ready to try, highest `spec.priority` first, then the oldest.
- backoffQ: pods that failed, until `initial × 2^(attempts−1)` (capped at max) has passed
  since their last attempt; `flush_backoff_completed` moves them back to activeQ.
- unschedulable pods wait for a cluster event that one of the plugins that rejected them
  registered (a node added, a pod deleted, ...), or for `max_in_unschedulable` at most.
- gated pods (non-empty `schedulingGates`) are held until an update empties the list.

The nominator remembers which pods were nominated to which node (`nominatedNodeName`), so
filtering can count their resources as taken for lower-priority pods.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from skiff.clock import REAL_CLOCK, Clock
from skiff.scheduler.framework import ClusterEvent
from skiff.scheduler.podinfo import PodInfo


class RetryHint(Protocol):
    """Whether an event (with the changed assigned pod, for pod events) may make a
    queued pod schedulable: the profile's plugins' queueing hints."""

    def __call__(self, qpi: QueuedPodInfo, event: ClusterEvent, old: PodInfo | None,
                 new: PodInfo | None) -> bool: ...


@dataclass(eq=False)
class QueuedPodInfo:
    pod: PodInfo
    timestamp: float  # when it was last added to the queue (its "age" in activeQ)
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    gated: bool = False

    @property
    def key(self) -> str:
        return self.pod.key


class Nominator:
    """Pods nominated to nodes by preemption (or seen with `status.nominatedNodeName`)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add_nominated(self, pod: PodInfo, node_name: str = "") -> None:
        node_name = node_name or pod.nominated_node_name
        self.delete_nominated(pod)
        if not node_name:
            return
        self._by_node.setdefault(node_name, {})[pod.key] = pod
        self._node_of[pod.key] = node_name

    def delete_nominated(self, pod: PodInfo) -> None:
        self.delete_key(pod.key)

    def delete_key(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self._by_node[node]

    def update_nominated(self, old: Mapping[str, Any] | None, new: PodInfo) -> None:
        """Keep a nomination the scheduler made even when the pod's status has not caught
        up yet (Kubernetes' `UpdateNominatedPod`)."""
        old_nominated = ((old or {}).get("status") or {}).get("nominatedNodeName")
        node = new.nominated_node_name
        if not node and not old_nominated:
            node = self._node_of.get(new.key, "")
        self.add_nominated(new, node)

    @property
    def nodes(self) -> Mapping[str, object]:
        """The nodes some pod is nominated to (empty nearly always: read per node, per
        cycle, before anything else)."""
        return self._by_node

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nominated_node(self, key: str) -> str:
        return self._node_of.get(key, "")


_BOOKKEEPING_METADATA = ("resourceVersion", "generation", "managedFields", "finalizers")


def pod_spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Kubernetes 1.32 `isPodUpdated`: the pod changed in anything but its status (save
    `status.resourceClaimStatuses`), resourceVersion, generation, managedFields and
    finalizers — so a new owner reference or annotation retries an unschedulable pod,
    while a kubelet's or the scheduler's own status write does not."""
    def strip(pod: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in pod.items() if k != "status"}
        meta = {k: v for k, v in (pod.get("metadata") or {}).items()
                if k not in _BOOKKEEPING_METADATA}
        out["metadata"] = meta
        claims = (pod.get("status") or {}).get("resourceClaimStatuses")
        if claims:
            out["status"] = {"resourceClaimStatuses": claims}
        return out
    return strip(old) != strip(new)


class SchedulingQueue:
    def __init__(self, *, initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = 300.0, clock: Clock = REAL_CLOCK,
                 events_for: Callable[[QueuedPodInfo], frozenset[ClusterEvent]] | None = None,
                 hint: RetryHint | None = None) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.clock = clock
        self.nominator = Nominator()
        self._events_for = events_for
        self._hint = hint
        self._seq = itertools.count()
        self._active: list[tuple[int, float, int, str]] = []
        self._active_pods: dict[str, QueuedPodInfo] = {}
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_pods: dict[str, QueuedPodInfo] = {}
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._unschedulable_since: dict[str, float] = {}
        self._in_flight: dict[str, QueuedPodInfo] = {}
        self._wakeup = asyncio.Event()
        self._closed = False
        self.scheduling_cycle = 0
        self.move_request_cycle = -1

    # -- reads -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._active_pods) + len(self._backoff_pods) + len(self._unschedulable)

    def active_keys(self) -> list[str]:
        return [k for _, _, _, k in sorted(self._active) if k in self._active_pods]

    def backoff_keys(self) -> list[str]:
        return list(self._backoff_pods)

    def unschedulable_keys(self) -> list[str]:
        return [k for k, q in self._unschedulable.items() if not q.gated]

    def gated_keys(self) -> list[str]:
        return [k for k, q in self._unschedulable.items() if q.gated]

    def contains(self, key: str) -> bool:
        return (key in self._active_pods or key in self._backoff_pods
                or key in self._unschedulable or key in self._in_flight)

    # -- backoff -----------------------------------------------------------------------------

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        duration = self.initial_backoff
        for _ in range(1, qpi.attempts):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return qpi.attempts > 0 and self.backoff_expiry(qpi) > self.clock.monotonic()

    # -- internal moves ----------------------------------------------------------------------

    def _push_active(self, qpi: QueuedPodInfo) -> None:
        self._active_pods[qpi.key] = qpi
        heapq.heappush(self._active, (-qpi.pod.priority, qpi.timestamp, next(self._seq),
                                      qpi.key))
        self._wakeup.set()

    def _push_backoff(self, qpi: QueuedPodInfo) -> None:
        self._backoff_pods[qpi.key] = qpi
        heapq.heappush(self._backoff, (self.backoff_expiry(qpi), next(self._seq), qpi.key))

    def _push_unschedulable(self, qpi: QueuedPodInfo) -> None:
        self._unschedulable[qpi.key] = qpi
        self._unschedulable_since[qpi.key] = self.clock.monotonic()

    def _remove_everywhere(self, key: str) -> QueuedPodInfo | None:
        qpi = (self._active_pods.pop(key, None) or self._backoff_pods.pop(key, None)
               or self._unschedulable.pop(key, None))
        self._unschedulable_since.pop(key, None)
        return qpi

    def _requeue(self, qpi: QueuedPodInfo) -> None:
        """Out of the unschedulable set: to backoffQ if still backing off, else activeQ."""
        self._unschedulable.pop(qpi.key, None)
        self._unschedulable_since.pop(qpi.key, None)
        if self.is_backing_off(qpi):
            self._push_backoff(qpi)
        else:
            self._push_active(qpi)

    # -- informer events ----------------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A new pending pod."""
        if self.contains(pod.key):
            self.update(None, pod)
            return
        qpi = QueuedPodInfo(pod, self.clock.monotonic())
        self.nominator.add_nominated(pod)
        if pod.scheduling_gates:
            qpi.gated = True
            self._push_unschedulable(qpi)
        else:
            self._push_active(qpi)

    def update(self, old: Mapping[str, Any] | None, new: PodInfo) -> None:
        key = new.key
        self.nominator.update_nominated(old, new)
        flight = self._in_flight.get(key)
        if flight is not None:
            flight.pod = new
            return
        for store in (self._active_pods, self._backoff_pods):
            qpi = store.get(key)
            if qpi is not None:
                qpi.pod = new  # priority changes take effect when it is next pushed
                return
        qpi = self._unschedulable.get(key)
        if qpi is None:
            self.add(new)
            return
        changed = old is None or pod_spec_changed(old, new.pod)
        qpi.pod = new
        if qpi.gated:
            if not new.scheduling_gates:
                qpi.gated = False
                self._unschedulable.pop(key, None)
                self._unschedulable_since.pop(key, None)
                qpi.timestamp = self.clock.monotonic()
                self._push_active(qpi)
            return
        if changed:
            self._requeue(qpi)

    def delete(self, key: str) -> None:
        self._remove_everywhere(key)
        self._in_flight.pop(key, None)
        self.nominator.delete_key(key)

    def move_all_to_active_or_backoff(self, event: ClusterEvent, *,
                                      old: PodInfo | None = None,
                                      new: PodInfo | None = None) -> int:
        """A cluster event: retry the unschedulable pods it may help. For a pod event
        `old`/`new` are the assigned pod before/after, for the plugins' queueing hints."""
        moved = 0
        for qpi in list(self._unschedulable.values()):
            if qpi.gated:
                continue
            if self._events_for is not None and qpi.unschedulable_plugins:
                if event not in self._events_for(qpi):
                    continue
            if self._hint is not None and not self._hint(qpi, event, old, new):
                continue
            self._requeue(qpi)
            moved += 1
        self.move_request_cycle = self.scheduling_cycle
        return moved

    # -- the scheduling loop ---------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits while activeQ is empty; None once closed."""
        while True:
            if self._closed:
                return None
            while self._active:
                _, _, _, key = heapq.heappop(self._active)
                qpi = self._active_pods.pop(key, None)
                if qpi is None:
                    continue  # stale heap entry (updated or deleted)
                self.scheduling_cycle += 1
                qpi.attempts += 1
                if qpi.initial_attempt_timestamp is None:
                    qpi.initial_attempt_timestamp = self.clock.monotonic()
                self._in_flight[key] = qpi
                return qpi
            self._wakeup.clear()
            await self._wakeup.wait()

    def done(self, key: str) -> None:
        """The pod left the scheduling cycle (scheduled, requeued or gone)."""
        self._in_flight.pop(key, None)

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, cycle: int) -> None:
        """After a failed attempt: to backoffQ when a move request came during the attempt
        (the cluster changed meanwhile) or no plugin said why; else wait for an event."""
        key = qpi.key
        self._in_flight.pop(key, None)
        if key in self._active_pods or key in self._backoff_pods or key in self._unschedulable:
            return
        qpi.timestamp = self.clock.monotonic()
        if qpi.pod.scheduling_gates:
            qpi.gated = True
            self._push_unschedulable(qpi)
        elif self.move_request_cycle >= cycle or not qpi.unschedulable_plugins:
            self._push_backoff(qpi)
        else:
            self._push_unschedulable(qpi)

    def add_to_backoff(self, qpi: QueuedPodInfo) -> None:
        """An error (not a verdict) during scheduling or binding: retry after backoff."""
        self._in_flight.pop(qpi.key, None)
        if self.contains(qpi.key):
            return
        qpi.timestamp = self.clock.monotonic()
        self._push_backoff(qpi)

    def flush_backoff_completed(self) -> int:
        now = self.clock.monotonic()
        moved = 0
        while self._backoff and self._backoff[0][0] <= now:
            _, _, key = heapq.heappop(self._backoff)
            qpi = self._backoff_pods.get(key)
            if qpi is None:
                continue
            if self.backoff_expiry(qpi) > now:  # re-pushed later with a longer backoff
                continue
            del self._backoff_pods[key]
            self._push_active(qpi)
            moved += 1
        return moved

    def flush_unschedulable_leftover(self) -> int:
        now = self.clock.monotonic()
        stale = [self._unschedulable[k] for k, since in self._unschedulable_since.items()
                 if now - since > self.max_in_unschedulable
                 and not self._unschedulable[k].gated]
        for qpi in stale:
            self._requeue(qpi)
        return len(stale)

    async def run_flushers(self, *, backoff_period: float = 1.0,
                           leftover_period: float = 30.0) -> None:
        """Kubernetes' periodic flushes: backoffQ every second, leftovers every 30 s."""
        elapsed = 0.0
        while True:
            await self.clock.sleep(backoff_period)
            self.flush_backoff_completed()
            elapsed += backoff_period
            if elapsed >= leftover_period:
                elapsed = 0.0
                self.flush_unschedulable_leftover()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

"""Node-pressure eviction (GT11): measure, compare with thresholds, evict one pod.

`memory.available` = node memory capacity − the resident memory of every pod's processes
(Skiff has no cgroups; the pods' measured RSS stands in for the working set). Hard
thresholds evict at once with a gracePeriodOverride of 1 s (Kubernetes ≥ 1.31: 0 would mean
"no override"), soft ones after their grace period with `--eviction-max-pod-grace-period`;
at most one pod per monitoring interval; critical pods (static, mirror, or priority
≥ 2000000000) are never evicted; the MemoryPressure node condition stays for the
transition period. Other signals
(nodefs.*, pid.*) are accepted in the flags and not measured.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skiff.api.quantity import bytes_
from skiff.client import WARNING
from skiff.clock import Clock, rfc3339
from skiff.kubelet.status import pod_requests_memory
from skiff.kubelet.termination import effective_grace_period
from skiff.settings import SettingsError

if TYPE_CHECKING:
    from skiff.kubelet.kubelet import Kubelet

__all__ = ["IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS", "EvictionManager", "PodUsage",
           "Threshold", "is_critical_pod", "parse_thresholds", "rank_for_eviction"]

log = logging.getLogger(__name__)

MEMORY_AVAILABLE = "memory.available"
_THRESHOLD = re.compile(r"^([a-z.]+)<(\S+)$")
# Kubernetes' immediateEvictionGracePeriodSeconds: the hard-eviction override (≥ 1.31).
IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1
# scheduling.SystemCriticalPriority: system-cluster-critical and above.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
_CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
_CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def is_critical_pod(pod: dict[str, Any]) -> bool:
    """Kubernetes' `IsCriticalPod`: a static pod (config source other than the API), a
    mirror pod, or a pod whose priority is at least system-cluster-critical's."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    source = annotations.get(_CONFIG_SOURCE_ANNOTATION)
    if (source is not None and source != "api") or _CONFIG_MIRROR_ANNOTATION in annotations:
        return True
    priority = (pod.get("spec") or {}).get("priority")
    return isinstance(priority, int) and not isinstance(priority, bool) and \
        priority >= SYSTEM_CRITICAL_PRIORITY


@dataclass(frozen=True)
class Threshold:
    signal: str
    quantity: int | None = None  # bytes
    percentage: float | None = None  # of capacity, 0–100

    def value(self, capacity: int) -> float:
        if self.percentage is not None:
            return capacity * self.percentage / 100
        return float(self.quantity or 0)


def parse_thresholds(text: str, *, flag: str) -> list[Threshold]:
    """Kubernetes' format: `memory.available<100Mi,nodefs.available<10%`."""
    thresholds = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        match = _THRESHOLD.match(item)
        if not match:
            raise SettingsError(f"{flag}: {item!r} is not signal<quantity (e.g. "
                                "memory.available<100Mi)")
        signal, value = match.groups()
        try:
            if value.endswith("%"):
                thresholds.append(Threshold(signal, percentage=float(value[:-1])))
            else:
                thresholds.append(Threshold(signal, quantity=bytes_(value)))
        except ValueError as err:
            raise SettingsError(f"{flag}: {item!r}: {err}") from None
    return thresholds


@dataclass(frozen=True)
class PodUsage:
    key: str
    usage: int
    requests: int
    priority: int
    critical: bool = False  # counts towards the node's usage, never evicted


def rank_for_eviction(pods: Sequence[PodUsage]) -> list[PodUsage]:
    """GT11 ranking: usage above requests first, then lower priority, then by how much
    the usage exceeds the requests (largest first)."""
    return sorted(pods, key=lambda p: (p.usage <= p.requests, p.priority,
                                       -(p.usage - p.requests)))


class EvictionManager:
    def __init__(self, *, kubelet: Kubelet, memory_capacity: int, hard: list[Threshold],
                 soft: list[Threshold], soft_grace_periods: dict[str, float],
                 max_pod_grace_period: int, pressure_transition_period: float,
                 interval: float, clock: Clock) -> None:
        self.kubelet = kubelet
        self.memory_capacity = memory_capacity
        self.hard = [t for t in hard if t.signal == MEMORY_AVAILABLE]
        self.soft = [t for t in soft if t.signal == MEMORY_AVAILABLE]
        self.soft_grace_periods = soft_grace_periods
        self.max_pod_grace_period = max_pod_grace_period
        self.pressure_transition_period = pressure_transition_period
        self.interval = interval
        self.clock = clock
        self._soft_since: float | None = None
        self._last_pressure: float | None = None
        self._pressure_since = rfc3339(clock.now())

    def node_conditions(self) -> list[dict[str, Any]]:
        pressure = self.under_pressure()
        return [{"type": "MemoryPressure", "status": str(pressure),
                 "reason": "KubeletHasInsufficientMemory" if pressure
                 else "KubeletHasSufficientMemory",
                 "message": "kubelet has insufficient memory available" if pressure
                 else "kubelet has sufficient memory available",
                 "lastHeartbeatTime": rfc3339(self.clock.now()),
                 "lastTransitionTime": self._pressure_since}]

    def under_pressure(self) -> bool:
        return self._last_pressure is not None and (
            self.clock.monotonic() - self._last_pressure < self.pressure_transition_period)

    def usage(self) -> dict[str, PodUsage]:
        result = {}
        for uid, worker in list(self.kubelet.workers.items()):
            if worker.terminating:
                continue
            used = sum(self.kubelet.env.runtime.memory_bytes(r.handle) for r in worker.records
                       if r.handle is not None and r.running)
            result[uid] = PodUsage(key=uid, usage=used,
                                   requests=pod_requests_memory(worker.pod),
                                   priority=int(worker.pod["spec"].get("priority") or 0),
                                   critical=is_critical_pod(worker.pod))
        return result

    async def run(self) -> None:
        while True:
            try:
                await self.synchronize()
            except Exception:
                log.exception("eviction check failed")
            await self.clock.sleep(self.interval)

    async def synchronize(self) -> None:
        usage = self.usage()
        available = self.memory_capacity - sum(u.usage for u in usage.values())
        hard = [t for t in self.hard if available < t.value(self.memory_capacity)]
        soft_met = [t for t in self.soft if available < t.value(self.memory_capacity)]
        now = self.clock.monotonic()
        if soft_met:
            self._soft_since = self._soft_since if self._soft_since is not None else now
        else:
            self._soft_since = None
        soft = [t for t in soft_met if self._soft_since is not None and now - self._soft_since
                >= self.soft_grace_periods.get(t.signal, 0.0)]
        was = self.under_pressure()
        if hard or soft_met:
            self._last_pressure = now
        if was != self.under_pressure():
            self._pressure_since = rfc3339(self.clock.now())
        threshold = hard[0] if hard else soft[0] if soft else None
        candidates = [u for u in usage.values() if not u.critical]
        if threshold is None or not candidates:
            if threshold is not None:
                log.warning("under node pressure, but every pod is critical; evicting none",
                            extra={"available": available})
            return
        override = IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS if hard else \
            self.max_pod_grace_period
        victim = rank_for_eviction(candidates)[0]
        worker = self.kubelet.workers.get(victim.key)
        if worker is None:
            return
        message = (f"The node was low on resource: memory. Threshold quantity: "
                   f"{int(threshold.value(self.memory_capacity))}, available: {available}. "
                   f"Pod was using {victim.usage}, request is {victim.requests}.")
        log.warning("evicting pod", extra={"pod": f"{worker.namespace}/{worker.name}",
                                            "available": available, "override": override})
        await self.kubelet.env.recorder.event(worker.pod, WARNING, "Evicted", message)
        period = effective_grace_period(worker.pod, override=override)
        done = worker.evict(override=override, message=message)
        try:
            async with asyncio.timeout(max(1.5 * period, 10.0)):  # see skiff.tasks
                await asyncio.shield(done)
        except TimeoutError:
            await self.kubelet.env.recorder.event(
                worker.pod, WARNING, "ExceededGracePeriod",
                "Container runtime did not kill the pod within specified grace period.")

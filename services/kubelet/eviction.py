"""Node-pressure eviction (GT11, AU10): measure, compare with thresholds, evict one pod.

Signals, as Kubernetes' kubelet names them:
- `memory.available` = node memory capacity − the pods' working sets: read from each pod's
  cgroup when the node has them (AU8, `cgroups.py`), else the resident memory of the pods'
  processes.
- `nodefs.available`, `nodefs.inodesFree`: free bytes and inodes of the filesystem holding
  the kubelet's root directory (pod directories, emptyDir volumes, container logs).
- `imagefs.available`, `imagefs.inodesFree`: Skiff has no images, so there is no image
  filesystem apart from nodefs; these thresholds are measured on nodefs (as Kubernetes does
  without a dedicated imagefs) and are not in the default.

Hard thresholds evict at once with a gracePeriodOverride of 1 s (Kubernetes ≥ 1.31: 0 would
mean "no override"), soft ones after their grace period with `--eviction-max-pod-grace-period`;
at most one pod per monitoring interval; critical pods (static, mirror, or priority
≥ 2000000000) are never evicted. Memory pressure ranks pods by memory usage over requests,
disk pressure by their ephemeral-storage usage (logs + emptyDir volumes on disk; there is no
writable image layer) over `requests.ephemeral-storage`, then priority (Kubernetes'
rankMemoryPressure / rankDiskPressure). MemoryPressure and DiskPressure node conditions stay
for the transition period; the node lifecycle controller turns them into the
`node.kubernetes.io/{memory,disk}-pressure` taints. `pid.*` is accepted and not measured.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skiff.api.quantity import bytes_, canonical
from skiff.api.wellknown import CONFIG_SOURCE_ANNOTATION, MIRROR_POD_ANNOTATION
from skiff.client import WARNING
from skiff.clock import Clock, rfc3339
from skiff.kubelet.status import pod_requests_memory
from skiff.kubelet.termination import effective_grace_period
from skiff.settings import SettingsError

if TYPE_CHECKING:
    from skiff.kubelet.kubelet import Kubelet

__all__ = ["IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS", "EvictionManager", "PodUsage",
           "Threshold", "disk_usage", "eviction_message", "is_critical_pod",
           "parse_thresholds", "rank_for_eviction"]

log = logging.getLogger(__name__)

MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE, NODEFS_INODES = "nodefs.available", "nodefs.inodesFree"
IMAGEFS_AVAILABLE, IMAGEFS_INODES = "imagefs.available", "imagefs.inodesFree"
# signal → the resource it reclaims (Kubernetes' signalToResource) and its node condition
SIGNALS = {MEMORY_AVAILABLE: ("memory", "MemoryPressure"),
           NODEFS_AVAILABLE: ("ephemeral-storage", "DiskPressure"),
           NODEFS_INODES: ("inodes", "DiskPressure"),
           IMAGEFS_AVAILABLE: ("ephemeral-storage", "DiskPressure"),
           IMAGEFS_INODES: ("inodes", "DiskPressure")}
# condition → (reason, message) when True and when False, as the kubelet's setters say
CONDITIONS = {
    "MemoryPressure": (("KubeletHasInsufficientMemory",
                        "kubelet has insufficient memory available"),
                       ("KubeletHasSufficientMemory", "kubelet has sufficient memory available")),
    "DiskPressure": (("KubeletHasDiskPressure", "kubelet has disk pressure"),
                     ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"))}
# `signal<value` (the flag) or `signal=value` (KubeletConfiguration's evictionHard map, as
# `skiff up --config` flattens a map)
_THRESHOLD = re.compile(r"^([A-Za-z.]+)[<=](\S+)$")
# Kubernetes' immediateEvictionGracePeriodSeconds: the hard-eviction override (≥ 1.31).
IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS = 1
# scheduling.SystemCriticalPriority: system-cluster-critical and above.
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000


def is_critical_pod(pod: dict[str, Any]) -> bool:
    """Kubernetes' `IsCriticalPod`: a static pod (config source other than the API), a
    mirror pod, or a pod whose priority is at least system-cluster-critical's."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    if (source is not None and source != "api") or MIRROR_POD_ANNOTATION in annotations:
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
    """Kubernetes' formats: `memory.available<100Mi,nodefs.available<10%` (the flags), or
    `memory.available=100Mi,...` (the `evictionHard: {memory.available: 100Mi}` map of a
    `--config` kubelet section)."""
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
    # (container, usage, request) for the eviction message's per-container lines
    containers: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


def disk_usage(paths: Sequence[Path]) -> tuple[int, int]:
    """(bytes, inodes) used under `paths` on their own filesystem, as `du` counts them:
    allocated blocks, hard links once, symlinks not followed, other mounts (a memory-backed
    emptyDir, a secret volume's tmpfs) not entered."""
    used = inodes = 0
    seen: set[tuple[int, int]] = set()
    for top in paths:
        try:
            device = os.lstat(top).st_dev
        except OSError:
            continue
        for directory, dirs, files in os.walk(top):
            for name in (*dirs, *files):
                try:
                    st = os.lstat(os.path.join(directory, name))
                except OSError:
                    continue
                if st.st_dev != device or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                used += st.st_blocks * 512
                inodes += 1
            dirs[:] = [d for d in dirs if _same_device(os.path.join(directory, d), device)]
    return used, inodes


def _same_device(path: str, device: int) -> bool:
    try:
        return os.lstat(path).st_dev == device
    except OSError:
        return False


def _quantity(value: int | float) -> str:
    return canonical(str(int(value)), binary=True)


def eviction_message(resource: str, threshold: int | float, available: int,
                     containers: Sequence[tuple[str, int, int]]) -> str:
    """Kubernetes' eviction message: the resource, the threshold met, and each container
    that used more than it requested (`kubectl describe` shows it as the pod's message)."""
    message = (f"The node was low on resource: {resource}. Threshold quantity: "
               f"{_quantity(threshold)}, available: {_quantity(available)}. ")
    for name, used, request in containers:
        if used > request:
            message += (f"Container {name} was using {_quantity(used)}, request is "
                        f"{_quantity(request)}, has larger consumption of {resource}. ")
    return message


def rank_for_eviction(pods: Sequence[PodUsage]) -> list[PodUsage]:
    """GT11 ranking: usage above requests first, then lower priority, then by how much
    the usage exceeds the requests (largest first)."""
    return sorted(pods, key=lambda p: (p.usage <= p.requests, p.priority,
                                       -(p.usage - p.requests)))


class EvictionManager:
    def __init__(self, *, kubelet: Kubelet, memory_capacity: int, hard: list[Threshold],
                 soft: list[Threshold], soft_grace_periods: dict[str, float],
                 max_pod_grace_period: int, pressure_transition_period: float,
                 interval: float, clock: Clock, nodefs: Path | None = None) -> None:
        self.kubelet = kubelet
        self.memory_capacity = memory_capacity
        self.nodefs = nodefs  # the kubelet's root directory (None: disk not measured)
        self.hard = [t for t in hard if t.signal in SIGNALS]
        self.soft = [t for t in soft if t.signal in SIGNALS]
        self.soft_grace_periods = soft_grace_periods
        self.max_pod_grace_period = max_pod_grace_period
        self.pressure_transition_period = pressure_transition_period
        self.interval = interval
        self.clock = clock
        self._soft_since: dict[str, float] = {}
        self._last_pressure: dict[str, float] = {}
        self._pressure_since = dict.fromkeys(CONDITIONS, rfc3339(clock.now()))

    def node_conditions(self) -> list[dict[str, Any]]:
        conditions = []
        for kind, (yes, no) in CONDITIONS.items():
            pressure = self._under(kind)
            reason, message = yes if pressure else no
            conditions.append({"type": kind, "status": str(pressure), "reason": reason,
                               "message": message,
                               "lastHeartbeatTime": rfc3339(self.clock.now()),
                               "lastTransitionTime": self._pressure_since[kind]})
        return conditions

    def _under(self, condition: str) -> bool:
        last = self._last_pressure.get(condition)
        return last is not None and (
            self.clock.monotonic() - last < self.pressure_transition_period)

    def under_pressure(self) -> bool:
        return self._under("MemoryPressure")

    def under_disk_pressure(self) -> bool:
        return self._under("DiskPressure")

    def usage(self) -> dict[str, PodUsage]:
        """Memory: each pod's working set (its cgroup), or its processes' resident set."""
        result = {}
        cgroups = self.kubelet.env.cgroups
        for uid, worker in list(self.kubelet.workers.items()):
            if worker.terminating:
                continue
            containers = []
            for r in worker.records:
                handle = r.handle
                if handle is None or not r.running:
                    continue
                measured = cgroups.container(worker.pod, r.name).usage() if cgroups else None
                used = measured.working_set if measured is not None else \
                    self.kubelet.env.runtime.memory_bytes(handle)
                request = ((r.spec.get("resources") or {}).get("requests") or {}).get("memory")
                containers.append((r.name, used, bytes_(request) if request else 0))
            result[uid] = PodUsage(key=uid, usage=sum(c[1] for c in containers),
                                   requests=pod_requests_memory(worker.pod),
                                   priority=int(worker.pod["spec"].get("priority") or 0),
                                   critical=is_critical_pod(worker.pod),
                                   containers=tuple(containers))
        return result

    def disk_usage(self, *, inodes: bool) -> dict[str, PodUsage]:
        """Ephemeral storage per pod: its containers' logs and its emptyDir volumes on the
        node's filesystem, over `requests.ephemeral-storage` (inodes: over nothing)."""
        result = {}
        for uid, worker in list(self.kubelet.workers.items()):
            if worker.terminating:
                continue
            spec = worker.pod.get("spec") or {}
            containers = []
            for r in worker.records:
                used = disk_usage([worker.dir.path / "logs" / r.name])[1 if inodes else 0]
                request = ((r.spec.get("resources") or {}).get("requests") or {}).get(
                    "ephemeral-storage")
                containers.append((r.name, used, 0 if inodes or not request
                                   else bytes_(request)))
            volumes = [worker.dir.volume_path(str(v.get("name", "")))
                       for v in spec.get("volumes") or []
                       if "emptyDir" in v and (v.get("emptyDir") or {}).get("medium")
                       != "Memory"]
            in_volumes = disk_usage(volumes)[1 if inodes else 0]
            result[uid] = PodUsage(
                key=uid, usage=in_volumes + sum(c[1] for c in containers),
                requests=sum(c[2] for c in containers),
                priority=int(spec.get("priority") or 0), critical=is_critical_pod(worker.pod),
                containers=tuple(containers))
        return result

    def observe(self, memory: dict[str, PodUsage]) -> dict[str, Observation]:
        observed = {MEMORY_AVAILABLE: Observation(
            available=self.memory_capacity - sum(u.usage for u in memory.values()),
            capacity=self.memory_capacity)}
        if self.nodefs is not None:
            try:
                fs = os.statvfs(self.nodefs)
            except OSError as err:
                log.warning("cannot measure the node's filesystem",
                            extra={"path": str(self.nodefs), "error": err.strerror})
            else:
                space = Observation(available=fs.f_bavail * fs.f_frsize,
                                    capacity=fs.f_blocks * fs.f_frsize)
                files = Observation(available=fs.f_favail, capacity=fs.f_files)
                observed.update({NODEFS_AVAILABLE: space, IMAGEFS_AVAILABLE: space,
                                 NODEFS_INODES: files, IMAGEFS_INODES: files})
        return observed

    async def run(self) -> None:
        while True:
            try:
                await self.synchronize()
            except Exception:
                log.exception("eviction check failed")
            await self.clock.sleep(self.interval)

    async def synchronize(self) -> None:
        usage = self.usage()
        observed = await asyncio.to_thread(self.observe, usage)

        def met(t: Threshold) -> bool:
            seen = observed.get(t.signal)
            return seen is not None and seen.available < t.value(seen.capacity)

        hard = [t for t in self.hard if met(t)]
        soft_met = [t for t in self.soft if met(t)]
        now = self.clock.monotonic()
        for signal in {t.signal for t in self.soft}:
            if any(t.signal == signal for t in soft_met):
                self._soft_since.setdefault(signal, now)
            else:
                self._soft_since.pop(signal, None)
        soft = [t for t in soft_met if now - self._soft_since[t.signal]
                >= self.soft_grace_periods.get(t.signal, 0.0)]
        was = {kind: self._under(kind) for kind in CONDITIONS}
        for t in hard + soft_met:
            self._last_pressure[SIGNALS[t.signal][1]] = now
        for kind in CONDITIONS:
            if was[kind] != self._under(kind):
                self._pressure_since[kind] = rfc3339(self.clock.now())
        # Kubernetes reclaims memory first; then the first threshold met, hard before soft
        order = sorted(hard, key=lambda t: t.signal != MEMORY_AVAILABLE) or \
            sorted(soft, key=lambda t: t.signal != MEMORY_AVAILABLE)
        if not order:
            return
        threshold = order[0]
        seen = observed[threshold.signal]
        resource = SIGNALS[threshold.signal][0]
        if resource != "memory":
            usage = await asyncio.to_thread(self.disk_usage, inodes=resource == "inodes")
        candidates = [u for u in usage.values() if not u.critical]
        if not candidates:
            log.warning("under node pressure, but every pod is critical; evicting none",
                        extra={"signal": threshold.signal, "available": seen.available})
            return
        override = IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS if hard else \
            self.max_pod_grace_period
        victim = rank_for_eviction(candidates)[0]
        worker = self.kubelet.workers.get(victim.key)
        if worker is None:
            return
        message = eviction_message(resource, threshold.value(seen.capacity), seen.available,
                                   victim.containers)
        log.warning("evicting pod", extra={"pod": f"{worker.namespace}/{worker.name}",
                                            "signal": threshold.signal,
                                            "available": seen.available, "override": override})
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

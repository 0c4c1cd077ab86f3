"""Pod admission on the node: the checks Kubernetes' kubelet makes before it starts a pod
the API bound to it (`canAdmitPod`), so a pod placed with `spec.nodeName` — past the
scheduler — on a node that cannot hold it fails as it would on a real node.

In Kubernetes' order, the first check that refuses decides:
- node pressure (the eviction manager's admit handler): under MemoryPressure alone only
  BestEffort pods are refused, unless they tolerate the `node.kubernetes.io/memory-pressure`
  NoSchedule taint; critical pods are always admitted. Reason `Evicted`, message
  "The node had condition: [MemoryPressure]. "; under DiskPressure every pod but the
  critical ones is refused ("The node had condition: [DiskPressure]. ").
- resources (the predicate admit handler's NodeResourcesFit): pod count, then cpu, memory
  and the extended resources the node advertises, against allocatable minus what the
  already admitted, non-terminal pods request. Reason `OutOfpods` / `OutOfcpu` / ...,
  message "Node didn't have enough resource: cpu, requested: 500, used: 1800, capacity:
  2000".

A refused pod is never started: it is marked Failed with that reason and the message
prefixed "Pod was rejected: ", and a Warning Event says why. Kubernetes' critical-pod
admission (evicting lower-priority pods to make room for a critical one) is not modelled:
a critical pod that does not fit is refused like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from skiff.api.pods import tolerates
from skiff.api.resources import Resource, is_extended_resource_name, pod_requests
from skiff.api.types import Obj
from skiff.api.wellknown import TAINT_MEMORY_PRESSURE
from skiff.kubelet.eviction import is_critical_pod
from skiff.kubelet.status import qos_class

__all__ = ["Admission", "Rejection"]

_MEMORY_PRESSURE_TAINT = {"key": TAINT_MEMORY_PRESSURE, "effect": "NoSchedule"}


@dataclass(frozen=True)
class Rejection:
    reason: str  # a single word: Evicted, OutOfcpu, OutOfmemory, OutOfpods, ...
    message: str


@dataclass
class Admission:
    """One node's admission: its allocatable resources (the Node's `allocatable`) and a
    view of its pressure conditions (the eviction manager's)."""

    allocatable: Mapping[str, str]
    memory_pressure: Callable[[], bool]
    disk_pressure: Callable[[], bool] = lambda: False

    def admit(self, pod: Obj, admitted: Iterable[Obj]) -> Rejection | None:
        """None to admit `pod`, else why not; `admitted`: the node's admitted pods that
        are not terminal (they hold their requests until they have stopped)."""
        rejection = None if is_critical_pod(pod) else self._pressure(pod)
        return rejection or self._fit(pod, list(admitted))

    def _pressure(self, pod: Obj) -> Rejection | None:
        if self.disk_pressure():  # any pressure but memory refuses every non-critical pod
            conditions = ["MemoryPressure"] * self.memory_pressure() + ["DiskPressure"]
            return Rejection("Evicted", f"The node had condition: [{' '.join(conditions)}]. ")
        if not self.memory_pressure():
            return None
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        if qos_class(pod) != "BestEffort" or any(
                tolerates(t, _MEMORY_PRESSURE_TAINT) for t in tolerations):
            return None
        return Rejection("Evicted", "The node had condition: [MemoryPressure]. ")

    def _fit(self, pod: Obj, admitted: list[Obj]) -> Rejection | None:
        allowed_pods = int(self.allocatable.get("pods") or 110)
        if len(admitted) + 1 > allowed_pods:
            return _insufficient("pods", 1, len(admitted), allowed_pods)
        request, _ = pod_requests(pod.get("spec") or {})
        used = Resource()
        for other in admitted:
            used.add(pod_requests(other.get("spec") or {})[0])
        capacity = Resource.from_list(self.allocatable)
        checks = [("cpu", request.milli_cpu, used.milli_cpu, capacity.milli_cpu),
                  ("memory", request.memory, used.memory, capacity.memory)]
        if "ephemeral-storage" in self.allocatable:
            checks.append(("ephemeral-storage", request.ephemeral_storage,
                           used.ephemeral_storage, capacity.ephemeral_storage))
        for name, value in sorted(request.scalar.items()):
            # As the kubelet's removeMissingExtendedResources: an extended resource the
            # node does not advertise is not its to check.
            if is_extended_resource_name(name) and name not in self.allocatable:
                continue
            checks.append((name, value, used.scalar.get(name, 0), capacity.scalar.get(name, 0)))
        for name, requested, in_use, total in checks:
            if requested > 0 and requested > total - in_use:
                return _insufficient(name, requested, in_use, total)
        return None


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> Rejection:
    return Rejection(f"OutOf{resource}", (
        f"Node didn't have enough resource: {resource}, requested: {requested}, "
        f"used: {used}, capacity: {capacity}"))

"""Pods and nodes parsed once into what scheduling reads, so a cycle over 5,000 nodes does
not re-parse quantities, labels or tolerations from dicts on every Filter call.

`PodInfo.from_pod` / `NodeFacts.from_node` never mutate the informer's dicts; they keep a
reference to them (`.pod`, `.node`) for writing back through the API.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api import bytes_, cpu_millis, is_terminating, parse_quantity
from skiff.clock import parse_rfc3339

Obj = Mapping[str, Any]

# Kubernetes' scoring defaults for containers without requests (schedutil.NonZeroRequests).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
_NOT_SCALAR = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, PODS, "storage"})


def is_scalar_resource_name(name: str) -> bool:
    """Kubernetes' `IsScalarResourceName`: extended resources (`example.com/gpu`),
    hugepages-*, attachable-volumes-* and prefixed native resources."""
    if name in _NOT_SCALAR:
        return False
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' `IsExtendedResourceName`: a domain-prefixed name outside
    kubernetes.io/ (and not a quota `requests.` name)."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


@dataclass(slots=True)
class Resource:
    """Kubernetes' `framework.Resource`: cpu (millicores), memory and ephemeral storage
    (bytes), and the scalar resources (extended, hugepages) by name."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    def add(self, other: Resource) -> None:
        self.milli_cpu += other.milli_cpu
        self.memory += other.memory
        self.ephemeral_storage += other.ephemeral_storage
        if other.scalar:
            for name, value in other.scalar.items():
                self.scalar[name] = self.scalar.get(name, 0) + value

    def sub(self, other: Resource) -> None:
        self.milli_cpu -= other.milli_cpu
        self.memory -= other.memory
        self.ephemeral_storage -= other.ephemeral_storage
        if other.scalar:
            for name, value in other.scalar.items():
                self.scalar[name] = self.scalar.get(name, 0) - value

    def copy(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage,
                        dict(self.scalar) if self.scalar else {})

    @classmethod
    def from_list(cls, resources: Mapping[str, Any]) -> Resource:
        """A `ResourceList` (`{"cpu": "500m", "example.com/gpu": "1"}`), parsed."""
        out = cls()
        for name, quantity in resources.items():
            if name == CPU:
                out.milli_cpu = cpu_millis(quantity)
            elif name == MEMORY:
                out.memory = bytes_(quantity)
            elif name == EPHEMERAL_STORAGE:
                out.ephemeral_storage = bytes_(quantity)
            elif is_scalar_resource_name(name):
                out.scalar[name] = bytes_(quantity)
        return out


def _container_requests(container: Obj) -> tuple[Resource, Resource]:
    """(requests, non-zero requests for scoring) of one container."""
    requests = ((container.get("resources") or {}).get("requests") or {})
    actual = Resource.from_list(requests) if requests else Resource()
    non_zero = Resource(actual.milli_cpu if CPU in requests else DEFAULT_MILLI_CPU_REQUEST,
                        actual.memory if MEMORY in requests else DEFAULT_MEMORY_REQUEST)
    return actual, non_zero


def _max(a: Resource, b: Resource) -> Resource:
    scalar = dict(a.scalar)
    for name, value in b.scalar.items():
        scalar[name] = max(scalar.get(name, 0), value)
    return Resource(max(a.milli_cpu, b.milli_cpu), max(a.memory, b.memory),
                    max(a.ephemeral_storage, b.ephemeral_storage), scalar)


def pod_requests(spec: Obj) -> tuple[Resource, Resource]:
    """Kubernetes' `resource.PodRequests`: app containers plus sidecars, at least the
    largest init container (with the sidecars started before it), plus overhead."""
    total, total_nz = Resource(), Resource()
    for c in spec.get("containers") or []:
        r, nz = _container_requests(c)
        total.add(r)
        total_nz.add(nz)
    sidecars, sidecars_nz = Resource(), Resource()
    init_max, init_max_nz = Resource(), Resource()
    for c in spec.get("initContainers") or []:
        r, nz = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars.add(r)
            sidecars_nz.add(nz)
            init_max, init_max_nz = _max(init_max, sidecars), _max(init_max_nz, sidecars_nz)
        else:
            during = sidecars.copy()
            during.add(r)
            during_nz = sidecars_nz.copy()
            during_nz.add(nz)
            init_max, init_max_nz = _max(init_max, during), _max(init_max_nz, during_nz)
    total.add(sidecars)
    total_nz.add(sidecars_nz)
    result, result_nz = _max(total, init_max), _max(total_nz, init_max_nz)
    overhead = spec.get("overhead") or {}
    if overhead:
        extra = Resource.from_list(overhead)
        result.add(extra)
        result_nz.add(Resource(extra.milli_cpu, extra.memory))
    return result, result_nz


@dataclass(slots=True, eq=False)
class PodInfo:
    """One version of a pod, parsed. `pod` is the informer's dict: never mutate it."""

    pod: Obj
    key: str
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    label_set: frozenset[tuple[str, str]]
    priority: int
    preemption_policy: str
    requests: Resource
    non_zero_requests: Resource
    node_name: str
    nominated_node_name: str
    terminating: bool
    start_time: float | None
    creation_time: float
    scheduler_name: str
    scheduling_gates: tuple[str, ...]
    tolerations: tuple[Mapping[str, Any], ...]
    node_selector: Mapping[str, str]
    affinity: Mapping[str, Any]
    spread_constraints: tuple[Mapping[str, Any], ...]
    controller_ref: Mapping[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_pod(cls, pod: Obj) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        labels = meta.get("labels") or {}
        requests, non_zero = pod_requests(spec)
        start = status.get("startTime")
        created = meta.get("creationTimestamp")
        controller = next((ref for ref in meta.get("ownerReferences") or []
                           if ref.get("controller")), None)
        namespace = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        return cls(
            pod=pod, key=f"{namespace}/{name}", uid=str(meta.get("uid") or ""),
            namespace=namespace, name=name, labels=labels,
            label_set=frozenset(labels.items()),
            priority=int(spec.get("priority") or 0),
            preemption_policy=str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
            requests=requests, non_zero_requests=non_zero,
            node_name=str(spec.get("nodeName") or ""),
            nominated_node_name=str(status.get("nominatedNodeName") or ""),
            terminating=is_terminating(pod),
            start_time=parse_rfc3339(start) if start else None,
            creation_time=parse_rfc3339(created) if created else 0.0,
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            scheduling_gates=tuple(str(g.get("name", "")) for g in
                                   spec.get("schedulingGates") or []),
            tolerations=tuple(spec.get("tolerations") or ()),
            node_selector=spec.get("nodeSelector") or {},
            affinity=spec.get("affinity") or {},
            spread_constraints=tuple(spec.get("topologySpreadConstraints") or ()),
            controller_ref=controller,
        )

    def with_node(self, node_name: str) -> PodInfo:
        """A copy assumed onto `node_name` (the scheduler's own view until bound)."""
        meta = dict(self.pod.get("metadata") or {})
        spec = dict(self.pod.get("spec") or {})
        spec["nodeName"] = node_name
        # Everything parsed stays the same but the node: no re-parsing of quantities.
        return dataclasses.replace(self, pod={**self.pod, "metadata": meta, "spec": spec},
                                   node_name=node_name, extra={})


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True, eq=False)
class NodeFacts:
    """One version of a node, parsed. `node` is the informer's dict: never mutate it."""

    node: Obj
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Resource
    allowed_pod_number: int

    @classmethod
    def from_node(cls, node: Obj) -> NodeFacts:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        return cls(
            node=node, name=str(meta.get("name") or ""), labels=meta.get("labels") or {},
            taints=tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""),
                               str(t.get("effect", ""))) for t in spec.get("taints") or []),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=Resource.from_list(alloc),
            allowed_pod_number=int(parse_quantity(alloc["pods"])) if "pods" in alloc else 0,
        )

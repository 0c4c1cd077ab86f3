"""Pod resource requests as Kubernetes computes them (`resource.PodRequests`), shared by
the scheduler (NodeResourcesFit, scoring) and the kubelet (its admission check: a pod
bound straight to a node that cannot hold it fails with OutOfcpu and the like)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from skiff.api.quantity import bytes_, cpu_millis, parse_quantity
from skiff.api.types import ObjView

# Kubernetes' scoring defaults for containers without requests (schedutil.NonZeroRequests).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024



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


def _container_requests(container: ObjView) -> tuple[Resource, Resource]:
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


def pod_requests(spec: ObjView) -> tuple[Resource, Resource]:
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


def _containers(spec: Mapping[str, Any]) -> list[tuple[bool, Mapping[str, Any]]]:
    """(is an init container, container) for every container of the pod spec."""
    return [(field == "initContainers", c) for field in ("containers", "initContainers")
            for c in spec.get(field) or []]


def pod_amounts(spec: Mapping[str, Any], part: str) -> dict[str, Fraction]:
    """A pod's exact `requests` or `limits` per resource name, as ResourceQuota and
    LimitRanger total them: the containers' sum, raised to any init container's."""
    total: dict[str, Fraction] = {}
    for init, container in _containers(spec):
        for name, amount in ((container.get("resources") or {}).get(part) or {}).items():
            have, more = total.get(name, Fraction(0)), parse_quantity(amount)
            total[name] = max(have, more) if init else have + more
    return total


def binary_amounts(spec: Mapping[str, Any], part: str) -> set[str]:
    """The resource names of `part` some container wrote with a binary suffix (`700Mi`):
    a total of them prints back that way, as Quantity keeps its format."""
    return {name for _, container in _containers(spec)
            for name, amount in ((container.get("resources") or {}).get(part) or {}).items()
            if str(amount).endswith("i")}

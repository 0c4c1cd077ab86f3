"""NodeResourcesFit Filter (Kubernetes' `fitsRequest`): the node must have room for one
more pod, and each resource the pod requests — cpu, memory, ephemeral-storage, extended
and hugepages resources — must fit in what the node's allocatable leaves after the pods
already there (assumed and terminating ones included). A resource the pod does not request
is not checked, so an overcommitted node still takes a pod that asks only for memory.
Every short resource is a reason ("Insufficient cpu", "Insufficient example.com/gpu").
Extended resources named in the args' `ignoredResources` / `ignoredResourceGroups` are
left to someone else (a scheduler extender in Kubernetes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.resources import is_extended_resource_name
from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    error,
    unschedulable,
)
from skiff.scheduler.podinfo import PodInfo

TOO_MANY_PODS = "Too many pods"
INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_MEMORY = "Insufficient memory"
INSUFFICIENT_EPHEMERAL_STORAGE = "Insufficient ephemeral-storage"


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    """pluginConfig args: `ignoredResources`, `ignoredResourceGroups`."""

    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, args: Mapping[str, Any] | None) -> NodeResourcesFitArgs:
        args = args or {}
        return cls(frozenset(str(r) for r in args.get("ignoredResources") or ()),
                   frozenset(str(g) for g in args.get("ignoredResourceGroups") or ()))


def insufficient_resources(pod: PodInfo, node: NodeInfo,
                           args: NodeResourcesFitArgs | None = None) -> list[str]:
    assert node.facts is not None
    reasons = []
    if len(node.pods) + 1 > node.facts.allowed_pod_number:
        reasons.append(TOO_MANY_PODS)
    req = pod.requests
    if (req.milli_cpu == 0 and req.memory == 0 and req.ephemeral_storage == 0
            and not req.scalar):
        return reasons
    alloc = node.facts.allocatable
    used = node.requested
    if req.milli_cpu > 0 and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append(INSUFFICIENT_CPU)
    if req.memory > 0 and req.memory > alloc.memory - used.memory:
        reasons.append(INSUFFICIENT_MEMORY)
    if (req.ephemeral_storage > 0
            and req.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage):
        reasons.append(INSUFFICIENT_EPHEMERAL_STORAGE)
    for name, quantity in req.scalar.items():
        if quantity == 0:
            continue
        if args is not None and is_extended_resource_name(name) and (
                name in args.ignored_resources
                or name.split("/", 1)[0] in args.ignored_resource_groups):
            continue
        if quantity > alloc.scalar.get(name, 0) - used.scalar.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


class NodeResourcesFitFilter:
    name = "NodeResourcesFit"
    args: NodeResourcesFitArgs = NodeResourcesFitArgs()

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE,
                          ClusterEvent.ASSIGNED_POD_DELETE})

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        facts = node.facts
        if facts is None:
            return error("node not found")
        # The common case (cpu and memory only, both fit), without building reasons.
        req = pod.requests
        if (len(node.pods) < facts.allowed_pod_number and not req.scalar
                and req.ephemeral_storage == 0
                and req.milli_cpu <= facts.allocatable.milli_cpu - node.requested.milli_cpu
                and req.memory <= facts.allocatable.memory - node.requested.memory):
            return SUCCESS
        reasons = insufficient_resources(pod, node, self.args)
        return unschedulable(*reasons) if reasons else SUCCESS

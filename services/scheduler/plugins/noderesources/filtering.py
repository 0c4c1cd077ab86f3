"""NodeResourcesFit Filter: the pod's requests must fit in what the node's allocatable
leaves after the pods already there (assumed and terminating ones included), and the node
must have room for one more pod. Every short resource is a reason ("Insufficient cpu")."""

from __future__ import annotations

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


def insufficient_resources(pod: PodInfo, node: NodeInfo) -> list[str]:
    assert node.facts is not None
    reasons = []
    if len(node.pods) + 1 > node.facts.allowed_pod_number:
        reasons.append(TOO_MANY_PODS)
    req = pod.requests
    if req.milli_cpu == 0 and req.memory == 0:
        return reasons
    alloc = node.facts.allocatable
    if req.milli_cpu > alloc.milli_cpu - node.requested.milli_cpu:
        reasons.append(INSUFFICIENT_CPU)
    if req.memory > alloc.memory - node.requested.memory:
        reasons.append(INSUFFICIENT_MEMORY)
    return reasons


class NodeResourcesFitFilter:
    name = "NodeResourcesFit"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE,
                          ClusterEvent.ASSIGNED_POD_DELETE})

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        facts = node.facts
        if facts is None:
            return error("node not found")
        # The common case, without building a list of reasons.
        req = pod.requests
        if len(node.pods) < facts.allowed_pod_number and (
                (req.milli_cpu == 0 and req.memory == 0)
                or (req.milli_cpu <= facts.allocatable.milli_cpu - node.requested.milli_cpu
                    and req.memory <= facts.allocatable.memory - node.requested.memory)):
            return SUCCESS
        reasons = insufficient_resources(pod, node)
        return unschedulable(*reasons) if reasons else SUCCESS

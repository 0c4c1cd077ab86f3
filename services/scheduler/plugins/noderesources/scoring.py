"""NodeResourcesFit Score, LeastAllocated strategy: for cpu and memory (weight 1 each),
`(allocatable - requested) * 100 / allocatable` with the pod included, using the non-zero
requests (100m / 200Mi for containers that request nothing), integer arithmetic."""

from __future__ import annotations

from collections.abc import Sequence

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import MAX_NODE_SCORE, CycleState
from skiff.scheduler.podinfo import PodInfo

DEFAULT_RESOURCE_WEIGHTS = (("cpu", 1), ("memory", 1))
_WEIGHT_SUM = sum(w for _, w in DEFAULT_RESOURCE_WEIGHTS)


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


class NodeResourcesFitScore:
    name = "NodeResourcesFit"

    def score_nodes(self, state: CycleState, pod: PodInfo,
                    nodes: Sequence[NodeInfo]) -> list[int]:
        pod_cpu, pod_memory = pod.non_zero_requests.milli_cpu, pod.non_zero_requests.memory
        out = []
        for node in nodes:
            facts = node.facts
            if facts is None:
                out.append(0)
                continue
            capacity = facts.allocatable.milli_cpu
            requested = node.non_zero_requested.milli_cpu + pod_cpu
            cpu = (0 if capacity == 0 or requested > capacity
                   else (capacity - requested) * MAX_NODE_SCORE // capacity)
            capacity = facts.allocatable.memory
            requested = node.non_zero_requested.memory + pod_memory
            memory = (0 if capacity == 0 or requested > capacity
                      else (capacity - requested) * MAX_NODE_SCORE // capacity)
            out.append((cpu + memory) // _WEIGHT_SUM)
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if node.facts is None:
            return 0
        alloc = node.facts.allocatable
        # least_requested_score for cpu and memory, inlined: this runs for every node.
        capacity = alloc.milli_cpu
        requested = node.non_zero_requested.milli_cpu + pod.non_zero_requests.milli_cpu
        cpu = (0 if capacity == 0 or requested > capacity
               else (capacity - requested) * MAX_NODE_SCORE // capacity)
        capacity = alloc.memory
        requested = node.non_zero_requested.memory + pod.non_zero_requests.memory
        memory = (0 if capacity == 0 or requested > capacity
                  else (capacity - requested) * MAX_NODE_SCORE // capacity)
        return (cpu * 1 + memory * 1) // _WEIGHT_SUM

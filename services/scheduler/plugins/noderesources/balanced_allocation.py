"""NodeResourcesBalancedAllocation Score (Kubernetes' `balancedResourceScorer`): with the
pod added, the fractions requested/allocatable of cpu and memory (each capped at 1) should
be close: score = (1 − standard deviation of the fractions) × 100. It uses the actual
requests (a container without requests adds nothing), as Kubernetes' `useRequested`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import MAX_NODE_SCORE, CycleState
from skiff.scheduler.podinfo import PodInfo


def balanced_resource_score(requested: list[int], allocatable: list[int]) -> int:
    fractions = [min(r / a, 1.0) for r, a in zip(requested, allocatable, strict=True)
                 if a != 0]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class NodeResourcesBalancedAllocation:
    name = "NodeResourcesBalancedAllocation"

    def score_nodes(self, state: CycleState, pod: PodInfo,
                    nodes: Sequence[NodeInfo]) -> list[int]:
        req_cpu, req_memory = pod.requests.milli_cpu, pod.requests.memory
        out = []
        for node in nodes:
            facts = node.facts
            if facts is None or not facts.allocatable.milli_cpu or not facts.allocatable.memory:
                out.append(self.score(state, pod, node))
                continue
            cpu = (node.requested.milli_cpu + req_cpu) / facts.allocatable.milli_cpu
            memory = (node.requested.memory + req_memory) / facts.allocatable.memory
            std = abs(((cpu if cpu < 1.0 else 1.0) - (memory if memory < 1.0 else 1.0)) / 2)
            out.append(int((1 - std) * MAX_NODE_SCORE))
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        facts = node.facts
        if facts is None:
            return 0
        alloc = facts.allocatable
        req = pod.requests
        cpu_capacity, memory_capacity = alloc.milli_cpu, alloc.memory
        if cpu_capacity and memory_capacity:
            # balanced_resource_score for two resources, inlined: it runs for every node.
            cpu = (node.requested.milli_cpu + req.milli_cpu) / cpu_capacity
            memory = (node.requested.memory + req.memory) / memory_capacity
            std = abs(((cpu if cpu < 1.0 else 1.0) - (memory if memory < 1.0 else 1.0)) / 2)
            return int((1 - std) * MAX_NODE_SCORE)
        return balanced_resource_score(
            [node.requested.milli_cpu + req.milli_cpu, node.requested.memory + req.memory],
            [alloc.milli_cpu, alloc.memory])

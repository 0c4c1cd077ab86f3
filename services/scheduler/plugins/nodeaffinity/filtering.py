"""NodeAffinity Filter: `spec.nodeSelector` (every label equal) AND
`requiredDuringSchedulingIgnoredDuringExecution` (any term whose expressions all hold)."""

from __future__ import annotations

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    error,
    unresolvable,
)
from skiff.scheduler.plugins.helpers import required_node_matcher
from skiff.scheduler.podinfo import PodInfo

ERR_REASON = "node(s) didn't match Pod's node affinity/selector"


class NodeAffinityFilter:
    name = "NodeAffinity"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Skip Filter for a pod with neither nodeSelector nor required affinity (as
        Kubernetes' PreFilter does): it fits every node."""
        return SKIP if required_node_matcher(pod) is None else SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.facts is None:
            return error("node not found")
        matcher = required_node_matcher(pod)
        if matcher is None or matcher(node.facts):
            return SUCCESS
        return unresolvable(ERR_REASON)

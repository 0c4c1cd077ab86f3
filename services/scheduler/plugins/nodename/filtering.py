"""NodeName Filter: reject every node but the one the pod asks for."""

from __future__ import annotations

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    unresolvable,
)
from skiff.scheduler.podinfo import PodInfo

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = "NodeName"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD})

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        """Skip Filter for a pod that names no node: it fits every node."""
        return SUCCESS if pod.node_name else SKIP

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = pod.node_name  # spec.nodeName, parsed once
        if wanted and wanted != node.name:
            return unresolvable(ERR_REASON)
        return SUCCESS

"""NodeName Filter: reject every node but the one the pod asks for."""

from __future__ import annotations

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
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

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = str((pod.pod.get("spec") or {}).get("nodeName") or "")
        if wanted and wanted != node.name:
            return unresolvable(ERR_REASON)
        return SUCCESS

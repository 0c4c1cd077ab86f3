"""NodeUnschedulable Filter: a cordoned node fits only pods tolerating
`node.kubernetes.io/unschedulable:NoSchedule`."""

from __future__ import annotations

from skiff.api.wellknown import TAINT_UNSCHEDULABLE
from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    error,
    unresolvable,
)
from skiff.scheduler.plugins.helpers import tolerates
from skiff.scheduler.podinfo import PodInfo, Taint

ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(TAINT_UNSCHEDULABLE, "", "NoSchedule")


class NodeUnschedulable:
    name = "NodeUnschedulable"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.facts is None:
            return error("node not found")
        if not node.facts.unschedulable:
            return SUCCESS
        if any(tolerates(t, UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return SUCCESS
        return unresolvable(ERR_REASON)

"""TaintToleration Filter: the first NoSchedule/NoExecute taint the pod does not tolerate
rejects the node, named in the message as Kubernetes does (`{key: value}`)."""

from __future__ import annotations

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    error,
    unresolvable,
)
from skiff.scheduler.plugins.helpers import find_untolerated_taint
from skiff.scheduler.podinfo import PodInfo

FILTER_EFFECTS = ("NoSchedule", "NoExecute")


class TaintTolerationFilter:
    name = "TaintToleration"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.NODE_ADD, ClusterEvent.NODE_UPDATE})

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.facts is None:
            return error("invalid nodeInfo")
        if not node.facts.taints:
            return SUCCESS
        taint = find_untolerated_taint(node.facts.taints, pod.tolerations, FILTER_EFFECTS)
        if taint is None:
            return SUCCESS
        return unresolvable(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")

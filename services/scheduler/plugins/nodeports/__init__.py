"""NodePorts (Kubernetes' nodeports plugin): a pod's hostPorts must be free on the node —
no pod already there (terminating ones included) binds the same protocol and port on
the same address or on 0.0.0.0."""

from __future__ import annotations

from dataclasses import dataclass

from skiff.scheduler.cache import NodeInfo
from skiff.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    unschedulable,
)
from skiff.scheduler.podinfo import HostPort, PodInfo

PRE_FILTER_STATE_KEY = "PreFilterNodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True)
class PreFilterState:
    wanted: tuple[HostPort, ...]

    def clone(self) -> PreFilterState:
        return self


def fits_ports(wanted: tuple[HostPort, ...], node: NodeInfo) -> bool:
    for pod in node.pods:
        for used in pod.host_ports:
            if any(used.conflicts(w) for w in wanted):
                return False
    return True


class NodePorts:
    name = "NodePorts"

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.NODE_ADD,
                          ClusterEvent.NODE_UPDATE})

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        if not pod.host_ports:
            return SKIP
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod.host_ports))
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is None or fits_ports(s.wanted, node):
            return SUCCESS
        return unschedulable(ERR_REASON)


__all__ = ["NodePorts"]

"""VolumeRestrictions (Kubernetes' volumerestrictions plugin) for Skiff's claims: a
ReadWriteOncePod claim may be used by one pod in the whole cluster, so a pod using one that
a scheduled pod already uses fits no node (Unschedulable: preempting that pod can help).
ReadWriteOnce claims are not restricted here, as in Kubernetes: one node at a time is the
attach/detach controller's and the kubelet's business (SPEC SC1). The in-tree disk
conflicts (GCE PD, EBS, RBD, iSCSI) have no Skiff counterpart."""

from __future__ import annotations

from dataclasses import dataclass

from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ClusterEvent,
    CycleState,
    Status,
    unresolvable,
    unschedulable,
)
from skiff.scheduler.plugins.volumebinding import ClaimLister
from skiff.scheduler.podinfo import PodInfo

PRE_FILTER_STATE_KEY = "PreFilterVolumeRestrictions"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
    "access mode")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


@dataclass
class PreFilterState:
    read_write_once_pod_claims: frozenset[str]  # claim names in the pod's namespace
    conflicting_refs: int = 0

    def clone(self) -> PreFilterState:
        return PreFilterState(self.read_write_once_pod_claims, self.conflicting_refs)

    def refs_of(self, pod: PodInfo, namespace: str) -> int:
        if pod.namespace != namespace:
            return 0
        return sum(1 for name in pod.pvc_names if name in self.read_write_once_pod_claims)


class VolumeRestrictions:
    name = "VolumeRestrictions"

    def __init__(self, *, cache: Cache, claims: ClaimLister | None) -> None:
        self.cache = cache
        self.claims = claims

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.PVC_CHANGE})

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        if not pod.pvc_names or self.claims is None:
            return SKIP
        exclusive = set()
        for name in pod.pvc_names:
            claim = self.claims.get_claim(pod.namespace, name)
            if claim is None:
                return unresolvable(f'persistentvolumeclaim "{name}" not found')
            if READ_WRITE_ONCE_POD in ((claim.get("spec") or {}).get("accessModes") or ()):
                exclusive.add(name)
        if not exclusive:
            return SKIP
        s = PreFilterState(frozenset(exclusive))
        s.conflicting_refs = sum(s.refs_of(p, pod.namespace) for p in self.cache.pods()
                                 if p.key != pod.key and p.node_name)
        state.write(PRE_FILTER_STATE_KEY, s)
        return SUCCESS

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                node: NodeInfo) -> None:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.conflicting_refs += s.refs_of(pod_to_add, pod.namespace)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> None:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is not None:
            s.conflicting_refs -= s.refs_of(pod_to_remove, pod.namespace)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s: PreFilterState | None = state.read(PRE_FILTER_STATE_KEY)
        if s is not None and s.conflicting_refs > 0:
            return unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
        return SUCCESS


__all__ = ["VolumeRestrictions"]

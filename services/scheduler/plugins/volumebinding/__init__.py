"""VolumeBinding, as far as Skiff's volumes go (Kubernetes' `podHasPVCs` PreFilter): every
PersistentVolumeClaim a pod's volumes name must exist in its namespace, not be lost and
not be being deleted; otherwise the pod is UnschedulableAndUnresolvable with Kubernetes'
words (`persistentvolumeclaim "data" not found`) until the claim changes. A claim that is
not fully bound yet (no `spec.volumeName` with `pv.kubernetes.io/bind-completed`) and whose
StorageClass does not say `WaitForFirstConsumer` — `Immediate`, no class, or a class that
does not exist — keeps the pod Pending the same way ("pod has unbound immediate
PersistentVolumeClaims") until the PersistentVolume controller binds it. Skiff has no
PersistentVolume topology to filter nodes by: a claim's volume can be attached to any node
(SPEC SC1), so there is no Filter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from skiff.api.groups.storage import WAIT_FOR_FIRST_CONSUMER
from skiff.api.wellknown import BIND_COMPLETED_ANNOTATION as BIND_COMPLETED
from skiff.api.wellknown import SELECTED_NODE_ANNOTATION as SELECTED_NODE
from skiff.scheduler.framework.interface import (
    SKIP,
    ClusterEvent,
    CycleState,
    Status,
    unresolvable,
)
from skiff.scheduler.podinfo import PodInfo


class ClaimLister(Protocol):
    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def get_storage_class(self, name: str) -> Mapping[str, Any] | None: ...


UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


def fully_bound(claim: Mapping[str, Any]) -> bool:
    """Kubernetes' isPVCFullyBound: a volume named and the binder's annotation set."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return bool((claim.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in annotations


def _delayed(claims: ClaimLister, claim: Mapping[str, Any]) -> bool:
    """Kubernetes' IsDelayBindingMode: only an existing WaitForFirstConsumer class delays."""
    name = (claim.get("spec") or {}).get("storageClassName") or ""
    storage_class = claims.get_storage_class(name) if name else None
    return bool(storage_class and
                storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER)


def claim_problem(claims: ClaimLister | None, pod: PodInfo) -> str:
    """Why the pod's claims keep it from being scheduled, or ""."""
    if claims is None:
        return ""
    unbound_immediate = False
    for name in pod.pvc_names:
        claim = claims.get_claim(pod.namespace, name)
        if claim is None:
            return f'persistentvolumeclaim "{name}" not found'
        if (claim.get("status") or {}).get("phase") == "Lost":
            volume = (claim.get("spec") or {}).get("volumeName") or ""
            return (f'persistentvolumeclaim "{name}" bound to non-existent '
                    f'persistentvolume "{volume}"')
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        # reported only once every claim exists, as Kubernetes' podHasPVCs comes first
        unbound_immediate |= not fully_bound(claim) and not _delayed(claims, claim)
    if unbound_immediate:
        return UNBOUND_IMMEDIATE
    return ""


class VolumeBinding:
    name = "VolumeBinding"

    def __init__(self, *, claims: ClaimLister | None) -> None:
        self.claims = claims

    def events_to_register(self) -> frozenset[ClusterEvent]:
        return frozenset({ClusterEvent.PVC_CHANGE, ClusterEvent.STORAGE_CLASS_CHANGE,
                          ClusterEvent.NODE_ADD,
                          ClusterEvent.NODE_UPDATE})

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        if not pod.pvc_names:
            return SKIP
        problem = claim_problem(self.claims, pod)
        return unresolvable(problem) if problem else SKIP


def delayed_claims(claims: ClaimLister, pod: PodInfo) -> list[Mapping[str, Any]]:
    """SPEC AX4, the VolumeBinding PreBind: the pod's unbound claims whose StorageClass
    says `WaitForFirstConsumer` and that no node was selected for yet; the scheduler
    annotates each with `volume.kubernetes.io/selected-node` before it binds the pod, and
    the PersistentVolume controller provisions or binds them for that node."""
    out = []
    for name in pod.pvc_names:
        claim = claims.get_claim(pod.namespace, name)
        if claim is None or (claim.get("spec") or {}).get("volumeName"):
            continue
        if SELECTED_NODE in ((claim.get("metadata") or {}).get("annotations") or {}):
            continue
        if _delayed(claims, claim):
            out.append(claim)
    return out


__all__ = ["SELECTED_NODE", "ClaimLister", "VolumeBinding", "delayed_claims"]

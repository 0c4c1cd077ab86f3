"""Where a ReadWriteOnce volume should be attached, and when it may be detached (SPEC SC1),
as pure functions of the cached pods, claims and fences.

Storage consistency: the volume of an RWO claim is `pvc-<claim uid>`, and a
`VolumeAttachment` of the same name says which node holds it; a kubelet runs a pod that
uses the claim only when the attachment names its own node and says `attached`. A volume
is detached only when no pod object that uses the claim is bound to the holding node any
more — a Terminating pod still counts, its processes may be running — or when that node
is confirmed fenced (its Fence is `Fenced`), because then nothing on it can write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.api.wellknown import LOCAL_VOLUME_PLUGIN as ATTACHER
from skiff.controller_manager.podutil import creation_time

EXCLUSIVE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")
FENCED = "Fenced"


def volume_name(claim: Mapping[str, Any]) -> str:
    """The volume bound to a claim (its PersistentVolume, SPEC AX4), and the name of its
    VolumeAttachment; `pvc-<claim uid>` (what the local provisioner names it) until bound."""
    bound = (claim.get("spec") or {}).get("volumeName")
    return str(bound) if bound else f"pvc-{claim['metadata']['uid']}"


def is_exclusive(claim: Mapping[str, Any]) -> bool:
    modes = (claim.get("spec") or {}).get("accessModes") or []
    return any(m in EXCLUSIVE_MODES for m in modes)


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The claims a pod's volumes reference (`persistentVolumeClaim.claimName`)."""
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        source = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if isinstance(source, dict) and source.get("claimName"):
            names.append(str(source["claimName"]))
    return names


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pods_using(claim: Mapping[str, Any], pods: Iterable[Obj]) -> list[Obj]:
    """Every pod object of the claim's namespace that references it, in any state."""
    ns, name = claim["metadata"].get("namespace"), claim["metadata"]["name"]
    return [p for p in pods
            if p["metadata"].get("namespace") == ns and name in claim_names(p)]


def attachment(claim: Mapping[str, Any], node_name: str) -> Obj:
    """The VolumeAttachment that attaches the claim's volume to `node_name`."""
    volume = volume_name(claim)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": volume},
            "spec": {"attacher": ATTACHER, "nodeName": node_name,
                     "source": {"persistentVolumeName": volume}}}


def fenced_nodes(fences: Iterable[Mapping[str, Any]]) -> set[str]:
    """Nodes whose Fence the agent has confirmed."""
    return {str((f.get("spec") or {}).get("nodeName"))
            for f in fences if (f.get("status") or {}).get("phase") == FENCED}


def may_detach(*, attached_to: str, users: Iterable[Mapping[str, Any]],
               fenced: set[str]) -> bool:
    """SC1: no pod object using the claim is bound to the node, or the node is fenced."""
    if attached_to in fenced:
        return True
    return not any(node_of(p) == attached_to for p in users)


@dataclass(frozen=True)
class AttachPlan:
    """Which node to attach to (empty: none), and the pods that must wait elsewhere."""

    node: str
    waiting: tuple[Obj, ...] = ()


def wants_volume(pod: Mapping[str, Any]) -> bool:
    """A scheduled pod that may still start: not terminal and not terminating."""
    return bool(node_of(pod)) and not is_pod_terminal(pod) and not is_terminating(pod)


def plan_attach(*, attached_to: str, users: Iterable[Obj], fencing: set[str]) -> AttachPlan:
    """`attached_to` is the current holder ("" for none); `fencing` are nodes with any
    Fence, which never get a new attachment. With no holder the oldest pod that wants the
    volume decides the node; pods that want it on another node wait (Multi-Attach)."""
    wanting = sorted((p for p in users if wants_volume(p) and node_of(p) not in fencing),
                     key=lambda p: (creation_time(p), str(p["metadata"]["name"])))
    node = attached_to or (node_of(wanting[0]) if wanting else "")
    return AttachPlan(node, tuple(p for p in wanting if node_of(p) != node))

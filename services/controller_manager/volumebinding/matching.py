"""Pure rules of the PersistentVolume binder (SPEC AX4), after Kubernetes'
`pkg/controller/volume/persistentvolume` and `volume/util.FindMatchingVolume`:

- a claim matches an unclaimed volume of the same storage class (both empty counts), with
  every access mode the claim asks for, the same volume mode, at least the requested
  capacity and labels its `selector` selects; the smallest such volume wins;
- a volume already pre-bound to the claim (`spec.claimRef`) wins over every other;
- a dynamically provisioned volume is named `pvc-<claim uid>`, has the class's reclaim
  policy and provisioner, and says which claim it was made for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skiff.api import LabelSelector, parse_quantity
from skiff.api.groups.storage import is_default_class
from skiff.api.types import ObjView
from skiff.api.wellknown import LOCAL_VOLUME_PLUGIN as LOCAL_PROVISIONER

PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"


def claim_class(claim: ObjView) -> str:
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_class(volume: ObjView) -> str:
    return str((volume.get("spec") or {}).get("storageClassName") or "")


def requested_bytes(claim: ObjView) -> int:
    request = (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get(
        "storage", "0")
    return int(parse_quantity(str(request)))


def capacity_bytes(volume: ObjView) -> int:
    return int(parse_quantity(str(((volume.get("spec") or {}).get("capacity") or {})
                                  .get("storage", "0"))))


def is_claimed_by(volume: ObjView, claim: ObjView) -> bool:
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    meta = claim.get("metadata") or {}
    return (ref.get("name") == meta.get("name")
            and ref.get("namespace") == meta.get("namespace")
            and (not ref.get("uid") or ref.get("uid") == meta.get("uid")))


def matches(volume: ObjView, claim: ObjView) -> bool:
    spec, cspec = volume.get("spec") or {}, claim.get("spec") or {}
    if volume.get("metadata", {}).get("deletionTimestamp"):
        return False
    if volume_class(volume) != claim_class(claim):
        return False
    if not set(cspec.get("accessModes") or []) <= set(spec.get("accessModes") or []):
        return False
    if (spec.get("volumeMode") or "Filesystem") != (cspec.get("volumeMode") or "Filesystem"):
        return False
    if capacity_bytes(volume) < requested_bytes(claim):
        return False
    selector = cspec.get("selector")
    if selector is not None:
        labels = (volume.get("metadata") or {}).get("labels") or {}
        if not LabelSelector.from_dict(dict(selector)).matches(labels):
            return False
    return True


def find_matching_volume(claim: ObjView, volumes: Iterable[ObjView]) -> ObjView | None:
    """The volume to bind `claim` to, or None."""
    best: ObjView | None = None
    for volume in volumes:
        ref = (volume.get("spec") or {}).get("claimRef")
        if ref:
            if is_claimed_by(volume, claim) and matches(volume, claim):
                return volume  # pre-bound to this claim
            continue
        if (volume.get("status") or {}).get("phase") not in (None, "Available", "Pending"):
            continue
        if matches(volume, claim) and (best is None
                                       or capacity_bytes(volume) < capacity_bytes(best)):
            best = volume
    return best


def default_class(classes: Iterable[ObjView]) -> ObjView | None:
    """The default StorageClass; with several, the newest (as Kubernetes 1.28+)."""
    defaults = [c for c in classes if is_default_class(c)]
    defaults.sort(key=lambda c: (str(c["metadata"].get("creationTimestamp", "")),
                                 str(c["metadata"]["name"])))
    return defaults[-1] if defaults else None


def claim_ref(claim: ObjView) -> dict[str, Any]:
    meta = claim["metadata"]
    return {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": meta.get("namespace"), "name": meta["name"], "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion")}


def provisioned_volume(claim: ObjView, storage_class: ObjView) -> dict[str, Any]:
    """The PersistentVolume the local provisioner makes for `claim` (a directory under the
    nodes' volume root, named like the volume, as rancher's local-path provisioner)."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    name = f"pvc-{meta['uid']}"
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {
            PROVISIONED_BY: str(storage_class.get("provisioner", LOCAL_PROVISIONER))}},
        "spec": {"capacity": {"storage": str(request)},
                 "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                 "volumeMode": spec.get("volumeMode") or "Filesystem",
                 "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy",
                                                                    "Delete"),
                 "storageClassName": storage_class["metadata"]["name"],
                 "claimRef": claim_ref(claim),
                 "csi": {"driver": LOCAL_PROVISIONER, "volumeHandle": name}},
    }

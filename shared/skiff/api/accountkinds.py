"""ServiceAccount, PersistentVolume and StorageClass (SPEC AX3, AX4): their validation,
defaults and `kubectl get` columns, kept apart from the older kinds so that adding them is
one hook line in each of `validation`, `defaults` and `tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.quantity import parse_quantity

Obj = dict[str, Any]

ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
PV_PHASES = ["Available", "Bound", "Failed", "Pending", "Released"]
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# Kubernetes' in-tree volume sources a PV may name; Skiff's local attacher serves hostPath
# and local (a directory on the node) and treats the others as opaque.
PV_SOURCES = ("hostPath", "local", "csi", "nfs", "iscsi", "fc", "gcePersistentDisk",
              "awsElasticBlockStore", "azureDisk", "cephfs", "rbd")


def _validate_service_account(
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("secrets", "imagePullSecrets"):
        value = obj.get(key)
        if value is not None and not isinstance(value, list):
            errors.append(invalid(key, value, "must be a list"))
    return errors


def _validate_persistent_volume(
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors: list[FieldError] = []
    modes = spec.get("accessModes")
    if not isinstance(modes, list) or not modes:
        errors.append(required("spec.accessModes"))
    else:
        for i, mode in enumerate(modes):
            if mode not in ACCESS_MODES:
                errors.append(not_supported(f"spec.accessModes[{i}]", mode, ACCESS_MODES))
    storage = (spec.get("capacity") or {}).get("storage") \
        if isinstance(spec.get("capacity"), dict) else None
    if storage is None:
        errors.append(required("spec.capacity", "must specify a storage capacity"))
    else:
        try:
            parse_quantity(str(storage))
        except ValueError:
            errors.append(invalid("spec.capacity.storage", storage,
                                  "must be a quantity, such as 1Gi"))
    sources = [k for k in PV_SOURCES if spec.get(k) is not None]
    if not sources:
        errors.append(required("spec", "must specify a volume type"))
    elif len(sources) > 1:
        errors.append(invalid("spec", sources, "may not specify more than 1 volume type"))
    if "hostPath" in sources and not (spec["hostPath"] or {}).get("path"):
        errors.append(required("spec.hostPath.path"))
    if "local" in sources and not (spec["local"] or {}).get("path"):
        errors.append(required("spec.local.path"))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy is not None and policy not in RECLAIM_POLICIES:
        errors.append(not_supported("spec.persistentVolumeReclaimPolicy", policy,
                                    RECLAIM_POLICIES))
    phase = (obj.get("status") or {}).get("phase")
    if phase is not None and phase not in PV_PHASES:
        errors.append(not_supported("status.phase", phase, PV_PHASES))
    return errors


def _validate_storage_class(
        obj: Mapping[str, Any],
        old: Mapping[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    if not obj.get("provisioner"):
        errors.append(required("provisioner"))
    policy = obj.get("reclaimPolicy")
    if policy is not None and policy not in ("Delete", "Retain"):
        errors.append(not_supported("reclaimPolicy", policy, ["Delete", "Retain"]))
    mode = obj.get("volumeBindingMode")
    if mode is not None and mode not in BINDING_MODES:
        errors.append(not_supported("volumeBindingMode", mode, BINDING_MODES))
    if old is not None:
        for key in ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"):
            if obj.get(key) != old.get(key):
                errors.append(invalid(key, obj.get(key), "field is immutable"))
    return errors


VALIDATORS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None],
                                list[FieldError]]] = {
    "ServiceAccount": _validate_service_account,
    "PersistentVolume": _validate_persistent_volume,
    "StorageClass": _validate_storage_class,
}


def _default_persistent_volume(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _default_storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


DEFAULTERS: dict[str, Callable[[Obj], None]] = {
    "PersistentVolume": _default_persistent_volume,
    "StorageClass": _default_storage_class,
}


def is_default_class(sc: Mapping[str, Any]) -> bool:
    annotations = sc.get("metadata", {}).get("annotations") or {}
    return str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true"


def _modes(obj: Obj) -> str:
    short = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}
    return ",".join(short.get(m, m) for m in obj.get("spec", {}).get("accessModes") or [])


def _claim_ref(obj: Obj) -> str:
    ref = obj.get("spec", {}).get("claimRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""


Column = tuple[str, Callable[[Obj], str]]


def columns(meta: Callable[[str], Callable[[Obj], str]],
            age: Callable[[Obj], str]) -> dict[str, list[Column]]:
    """`kubectl get` columns for the kinds of this module (Kubernetes' printers)."""
    return {
        "ServiceAccount": [
            ("NAME", meta("name")),
            ("SECRETS", lambda o: str(len(o.get("secrets") or []))),
            ("AGE", age)],
        "PersistentVolume": [
            ("NAME", meta("name")),
            ("CAPACITY", lambda o: str((o.get("spec", {}).get("capacity") or {})
                                       .get("storage", ""))),
            ("ACCESS MODES", _modes),
            ("RECLAIM POLICY", lambda o: str(o.get("spec", {}).get(
                "persistentVolumeReclaimPolicy", ""))),
            ("STATUS", lambda o: str(o.get("status", {}).get("phase", ""))),
            ("CLAIM", _claim_ref),
            ("STORAGECLASS", lambda o: str(o.get("spec", {}).get("storageClassName", ""))),
            ("VOLUMEATTRIBUTESCLASS", lambda o: str(o.get("spec", {}).get(
                "volumeAttributesClassName") or "<unset>")),
            ("REASON", lambda o: str(o.get("status", {}).get("reason", ""))),
            ("AGE", age)],
        "StorageClass": [
            ("NAME", lambda o: meta("name")(o) + (" (default)" if is_default_class(o)
                                                  else "")),
            ("PROVISIONER", lambda o: str(o.get("provisioner", ""))),
            ("RECLAIMPOLICY", lambda o: str(o.get("reclaimPolicy", ""))),
            ("VOLUMEBINDINGMODE", lambda o: str(o.get("volumeBindingMode", ""))),
            ("ALLOWVOLUMEEXPANSION", lambda o: str(bool(o.get("allowVolumeExpansion")))
             .lower()),
            ("AGE", age)],
    }

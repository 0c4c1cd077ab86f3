"""PersistentVolumes and PersistentVolumeClaims (core/v1, SPEC AX4): their defaults,
validation, kubectl's columns and known fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict, as_list, immutable
from skiff.api.fielddefaults import child, set_default
from skiff.api.fieldschema import CONDITION, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.quantity import parse_quantity
from skiff.api.types import Obj, ObjView

PV_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
PV_PHASES = ["Available", "Bound", "Failed", "Pending", "Released"]
# Kubernetes' in-tree volume sources a PV may name; Skiff's local attacher serves hostPath
# and local (a directory on the node) and treats the others as opaque.
PV_SOURCES = ("hostPath", "local", "csi", "nfs", "iscsi", "fc", "gcePersistentDisk",
              "awsElasticBlockStore", "azureDisk", "cephfs", "rbd")


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
            if mode not in PV_ACCESS_MODES:
                errors.append(not_supported(f"spec.accessModes[{i}]", mode, PV_ACCESS_MODES))
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


ACCESS_MODES = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]


def _validate_pvc(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    modes, errs = as_list(spec.get("accessModes"), "spec.accessModes")
    errors += errs
    if not modes:
        errors.append(required("spec.accessModes", "at least 1 access mode is required"))
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            errors.append(not_supported(f"spec.accessModes[{i}]", mode, ACCESS_MODES))
    if old is not None:
        for key in ("accessModes", "storageClassName", "volumeName"):
            old_value = old.get("spec", {}).get(key)
            if old_value is not None and spec.get(key) != old_value:
                errors += immutable(spec.get(key), old_value, f"spec.{key}")
    return errors


def _default_persistent_volume(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _default_pvc(obj: Obj) -> None:
    set_default(child(obj, "spec"), "volumeMode", "Filesystem")
    set_default(child(obj, "status"), "phase", "Pending")


def _modes(obj: Obj) -> str:
    short = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
             "ReadWriteOncePod": "RWOP"}
    return ",".join(short.get(m, m) for m in obj.get("spec", {}).get("accessModes") or [])


def _claim_ref(obj: Obj) -> str:
    ref = obj.get("spec", {}).get("claimRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""


RULES = GroupRules(
    defaulters={"PersistentVolume": _default_persistent_volume,
                "PersistentVolumeClaim": _default_pvc},
    validators={"PersistentVolume": _validate_persistent_volume,
                "PersistentVolumeClaim": _validate_pvc},
    columns={
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
            ("AGE", age_column)],
        "PersistentVolumeClaim": [
            ("NAME", meta("name")),
            ("STATUS", lambda o: str(o.get("status", {}).get("phase", ""))),
            ("VOLUME", lambda o: str(o.get("spec", {}).get("volumeName", "") or "")),
            # kubectl's printer: capacity and access modes from the status, once bound
            ("CAPACITY", lambda o: str((o.get("status", {}).get("capacity") or {}).get(
                "storage", "")) if o.get("spec", {}).get("volumeName") else ""),
            ("ACCESS MODES", lambda o: ",".join(
                {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                 "ReadWriteOncePod": "RWOP"}.get(m, m)
                for m in o.get("status", {}).get("accessModes") or [])
             if o.get("spec", {}).get("volumeName") else ""),
            ("STORAGECLASS", lambda o: str(o.get("spec", {}).get("storageClassName") or "")),
            ("VOLUMEATTRIBUTESCLASS", lambda o: str(o.get("spec", {}).get(
                "volumeAttributesClassName") or "<unset>")),
            ("AGE", age_column)],
    },
    wide={
        "PersistentVolumeClaim": [("VOLUMEMODE", lambda o: str(
            o.get("spec", {}).get("volumeMode") or "<unset>"))],
    },
    schemas={
        "PersistentVolumeClaim": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("accessModes", "resources", "storageClassName", "volumeName",
                        "volumeMode", "selector", "dataSource", "dataSourceRef",
                        "volumeAttributesClassName"),
            status=fields("phase", "accessModes", "capacity", "allocatedResources",
                          "currentVolumeAttributesClassName", conditions=ListOf(CONDITION)),
        ),
    },
)

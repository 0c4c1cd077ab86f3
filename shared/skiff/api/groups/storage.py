"""The storage.k8s.io/v1 group: StorageClasses (defaults, validation, the default-class
annotation), VolumeAttachments (a volume attached to a node; its spec never changes) and
CSIStorageCapacities — kubectl's columns and known fields.

Skiff has no CSI drivers, so CSIStorageCapacity is served empty: it exists so that clients
that discover it (the scheduler's VolumeBinding plugin, CSI external-provisioners, client
test suites) can list, watch, create and delete it, with Kubernetes' validation
(pkg/apis/storage/validation: ValidateCSIStorageCapacity and its Update).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, forbidden, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict
from skiff.api.fieldschema import LABEL_SELECTOR, OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.quantity import canonical, parse_quantity
from skiff.api.selectors import dns1123_subdomain_problems, validate_label_selector
from skiff.api.types import Obj, ObjView
from skiff.api.wellknown import DEFAULT_CLASS_ANNOTATION

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"  # volumeBindingMode: bind once a pod is scheduled
BINDING_MODES = ["Immediate", WAIT_FOR_FIRST_CONSUMER]


def _quantity_problems(value: Any, path: str) -> list[FieldError]:
    """ValidateNonnegativeQuantity (a value that is no quantity at all is refused too:
    Kubernetes' decoder refuses it before validation)."""
    try:
        amount = parse_quantity(value)
    except (ValueError, TypeError):
        return [invalid(path, value, "must be a quantity, such as 1Gi")]
    if amount < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    return []


def _validate_csi_storage_capacity(obj: Mapping[str, Any],
                                   old: Mapping[str, Any] | None) -> list[FieldError]:
    errors = validate_label_selector(obj.get("nodeTopology"), "nodeTopology")
    class_name = obj.get("storageClassName")
    class_name = class_name if isinstance(class_name, str) else ""
    errors += [invalid("storageClassName", class_name, problem)
               for problem in dns1123_subdomain_problems(class_name)]
    for key in ("capacity", "maximumVolumeSize"):
        if obj.get(key) is not None:
            errors += _quantity_problems(obj[key], key)
    if old is not None:  # the inputs of CSI GetCapacity are immutable
        for key in ("nodeTopology", "storageClassName"):
            if obj.get(key) != old.get(key):
                errors.append(invalid(key, obj.get(key), "field is immutable"))
    return errors


def _capacity(obj: Obj) -> str:
    value = obj.get("capacity")
    if value is None:
        return "<unset>"
    try:
        return canonical(value)
    except (ValueError, TypeError):
        return str(value)


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


def _default_storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def is_default_class(sc: Mapping[str, Any]) -> bool:
    """Whether a StorageClass is annotated as the cluster's default."""
    annotations = sc.get("metadata", {}).get("annotations") or {}
    return str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true"


def _validate_volume_attachment(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    for key in ("attacher", "nodeName"):
        if not spec.get(key):
            errors.append(required(f"spec.{key}"))
    source, errs = as_dict(spec.get("source"), "spec.source")
    errors += errs
    if not source.get("persistentVolumeName"):
        errors.append(required("spec.source.persistentVolumeName"))
    if old is not None and spec != old.get("spec"):
        errors.append(forbidden("spec", "spec is immutable: a volume moves to another node "
                                        "only by deleting this attachment (detach) first"))
    return errors


RULES = GroupRules(
    defaulters={"StorageClass": _default_storage_class},
    validators={"CSIStorageCapacity": _validate_csi_storage_capacity,
                "StorageClass": _validate_storage_class,
                "VolumeAttachment": _validate_volume_attachment},
    columns={
        # kubectl's columns (printCSIStorageCapacity): no AGE
        "CSIStorageCapacity": [
            ("NAME", meta("name")),
            ("STORAGECLASSNAME", lambda o: str(o.get("storageClassName") or "")),
            ("CAPACITY", _capacity)],
        "StorageClass": [
            ("NAME", lambda o: meta("name")(o) + (" (default)" if is_default_class(o)
                                                  else "")),
            ("PROVISIONER", lambda o: str(o.get("provisioner", ""))),
            ("RECLAIMPOLICY", lambda o: str(o.get("reclaimPolicy", ""))),
            ("VOLUMEBINDINGMODE", lambda o: str(o.get("volumeBindingMode", ""))),
            ("ALLOWVOLUMEEXPANSION", lambda o: str(bool(o.get("allowVolumeExpansion")))
             .lower()),
            ("AGE", age_column)],
        "VolumeAttachment": [
            ("NAME", meta("name")),
            ("ATTACHER", lambda o: str(o.get("spec", {}).get("attacher", ""))),
            ("PV", lambda o: str(o.get("spec", {}).get("source", {}).get(
                "persistentVolumeName", ""))),
            ("NODE", lambda o: str(o.get("spec", {}).get("nodeName", ""))),
            ("ATTACHED", lambda o: str(bool(o.get("status", {}).get("attached"))).lower()),
            ("AGE", age_column)],
    },
    schemas={
        "CSIStorageCapacity": fields(*TOP, "storageClassName", "capacity", "maximumVolumeSize",
                                     metadata=OBJECT_META, nodeTopology=LABEL_SELECTOR),
        "VolumeAttachment": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("attacher", "nodeName", source=fields("persistentVolumeName",
                                                              "inlineVolumeSpec")),
            status=fields("attached", "attachmentMetadata", "attachError", "detachError"),
        ),
    },
)

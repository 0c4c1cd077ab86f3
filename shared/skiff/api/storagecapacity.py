"""CSIStorageCapacity (storage.k8s.io/v1): how much storage a CSI driver reports for a
StorageClass in a topology segment. Skiff has no CSI drivers, so the kind is served empty:
it exists so that clients that discover it (the scheduler's VolumeBinding plugin, CSI
external-provisioners, client test suites) can list, watch, create and delete it, with
Kubernetes' validation (pkg/apis/storage/validation: ValidateCSIStorageCapacity and its
Update) and kubectl's columns. One hook line in each of `validation` and `tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skiff.api.errors import FieldError, invalid
from skiff.api.quantity import canonical, parse_quantity
from skiff.api.selectors import dns1123_subdomain_problems, validate_label_selector

Obj = dict[str, Any]
Column = tuple[str, Callable[[Obj], str]]


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


VALIDATORS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None],
                                list[FieldError]]] = {
    "CSIStorageCapacity": _validate_csi_storage_capacity,
}


def _capacity(obj: Obj) -> str:
    value = obj.get("capacity")
    if value is None:
        return "<unset>"
    try:
        return canonical(value)
    except (ValueError, TypeError):
        return str(value)


def columns(meta: Callable[[str], Callable[[Obj], str]]) -> dict[str, list[Column]]:
    """kubectl's columns (printCSIStorageCapacity): no AGE."""
    return {"CSIStorageCapacity": [
        ("NAME", meta("name")),
        ("STORAGECLASSNAME", lambda o: str(o.get("storageClassName") or "")),
        ("CAPACITY", _capacity)]}

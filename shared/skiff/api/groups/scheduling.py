"""The scheduling.k8s.io/v1 group: PriorityClasses — defaults, validation (user-definable
values, the reserved `system-` names, what may not change), kubectl's columns and fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, forbidden, invalid, required
from skiff.api.fieldchecks import (
    INT32_MAX,
    INT32_MIN,
    as_dict,
    enum_field,
    immutable,
    is_int,
    str_field,
)
from skiff.api.fielddefaults import set_default
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}


def _default_priority_class(obj: Obj) -> None:
    set_default(obj, "preemptionPolicy", "PreemptLowerPriority")
    if obj.get("globalDefault") is None:
        obj["globalDefault"] = False


def _validate_priority_class(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors: list[FieldError] = []
    meta, _ = as_dict(obj.get("metadata"), "metadata")
    name = meta.get("name") or ""
    value = obj.get("value")
    if value is None:
        errors.append(required("value"))
    elif not is_int(value):
        errors.append(invalid("value", value, "must be an integer"))
    elif not INT32_MIN <= value <= INT32_MAX:
        errors.append(invalid("value", value, f"must be between {INT32_MIN} and {INT32_MAX}"))
        value = None
    global_default = obj.get("globalDefault")
    if global_default is not None and not isinstance(global_default, bool):
        errors.append(invalid("globalDefault", global_default, "must be a boolean"))
    errors += str_field(obj, "description", "description")
    errors += enum_field(obj, "preemptionPolicy", "preemptionPolicy",
                         ["PreemptLowerPriority", "Never"])
    if isinstance(name, str) and name.startswith("system-"):
        problem = None
        if name not in SYSTEM_PRIORITY_CLASSES:
            problem = f"{name} is not a known system priority class"
        elif value != SYSTEM_PRIORITY_CLASSES[name]:
            problem = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
        elif global_default:
            problem = f"globalDefault of {name} PriorityClass must be false"
        if problem:
            errors.append(forbidden("metadata.name", "priority class names with 'system-' "
                                                     "prefix are reserved for system use "
                                                     f"only. error: {problem}"))
    elif is_int(value) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(forbidden("value", "maximum allowed value of a user defined priority "
                                         f"is {HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if old is not None:
        if obj.get("value") != old.get("value"):
            errors.append(forbidden("value", "may not be changed in an update."))
        errors += immutable(obj.get("preemptionPolicy"), old.get("preemptionPolicy"),
                             "preemptionPolicy")
    return errors


RULES = GroupRules(
    defaulters={"PriorityClass": _default_priority_class},
    validators={"PriorityClass": _validate_priority_class},
    columns={
        "PriorityClass": [("NAME", meta("name")), ("VALUE", lambda o: str(o.get("value", ""))),
                          ("GLOBAL-DEFAULT", lambda o: str(bool(o.get("globalDefault"))).lower()),
                          ("PREEMPTIONPOLICY", lambda o: str(o.get("preemptionPolicy", ""))),
                          ("AGE", age_column)],
    },
    schemas={
        "PriorityClass": fields(*TOP, "value", "globalDefault", "description",
                                "preemptionPolicy", metadata=OBJECT_META),
    },
)

"""The policy/v1 group: PodDisruptionBudgets — validation (minAvailable or maxUnavailable,
an int or a percentage; a label selector), kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, required
from skiff.api.fieldchecks import as_dict, enum_field, int_or_percent
from skiff.api.fieldschema import CONDITION, LABEL_SELECTOR, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.selectors import validate_label_selector
from skiff.api.types import ObjView


def _validate_pdb(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        errors.append(invalid("spec", "", "minAvailable and maxUnavailable cannot be both set"))
    elif min_available is None and max_unavailable is None:
        errors.append(required("spec.minAvailable", "one of minAvailable or maxUnavailable "
                                                    "is required"))
    if min_available is not None:
        errors += int_or_percent(min_available, "spec.minAvailable")
    if max_unavailable is not None:
        errors += int_or_percent(max_unavailable, "spec.maxUnavailable")
    errors += validate_label_selector(spec.get("selector"), "spec.selector")
    errors += enum_field(spec, "unhealthyPodEvictionPolicy", "spec.unhealthyPodEvictionPolicy",
                         ["IfHealthyBudget", "AlwaysAllow"])
    return errors


RULES = GroupRules(
    validators={"PodDisruptionBudget": _validate_pdb},
    columns={
        "PodDisruptionBudget": [
            ("NAME", meta("name")),
            ("MIN AVAILABLE", lambda o: str(o.get("spec", {}).get("minAvailable", "N/A"))),
            ("MAX UNAVAILABLE", lambda o: str(o.get("spec", {}).get("maxUnavailable", "N/A"))),
            ("ALLOWED DISRUPTIONS",
             lambda o: str(o.get("status", {}).get("disruptionsAllowed", 0))),
            ("AGE", age_column)],
    },
    schemas={
        "PodDisruptionBudget": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy",
                        selector=LABEL_SELECTOR),
            status=fields("observedGeneration", "disruptedPods", "disruptionsAllowed",
                          "currentHealthy", "desiredHealthy", "expectedPods",
                          conditions=ListOf(CONDITION)),
        ),
    },
)

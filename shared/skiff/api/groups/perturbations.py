"""Skiff's own skiff.io/v1 Perturbations (controller testing): what the apiserver does to
one client identity's view of the cluster — a stale view, missed watch events — as
declared objects, so every perturbation is in etcd's event log. Validation, kubectl's
columns and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError
from skiff.api.fieldchecks import as_dict
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import ObjView


def _validate_perturbation(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    _, errors = as_dict(obj.get("spec"), "spec")
    return errors


RULES = GroupRules(
    validators={"Perturbation": _validate_perturbation},
    columns={"Perturbation": [("NAME", meta("name")), ("AGE", age_column)]},
    schemas={"Perturbation": fields(*TOP, "spec", "status", metadata=OBJECT_META)},
)

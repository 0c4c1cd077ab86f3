"""The apiextensions.k8s.io/v1 group: CustomResourceDefinitions (SPEC EX1) — their
validation (`skiff.api.apiextensions`), kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import meta
from skiff.api.errors import FieldError
from skiff.api.fieldchecks import as_dict
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import ObjView


def _validate_crd(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    _, errors = as_dict(obj.get("spec"), "spec")
    return errors


RULES = GroupRules(
    validators={"CustomResourceDefinition": _validate_crd},
    columns={
        "CustomResourceDefinition": [
            ("NAME", meta("name")),
            ("CREATED AT", lambda o: str(o.get("metadata", {}).get("creationTimestamp", ""))),
        ],
    },
    schemas={
        "CustomResourceDefinition": fields(*TOP, "spec", "status", metadata=OBJECT_META),
    },
)

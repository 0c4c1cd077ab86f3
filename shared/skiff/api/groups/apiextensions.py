"""The apiextensions.k8s.io/v1 group: CustomResourceDefinitions (SPEC EX1) — their
validation and v1 defaults (`skiff.api.apiextensions.crd`), kubectl's columns and known
fields."""

from __future__ import annotations

from skiff.api.apiextensions.crd import default_crd, validate_crd
from skiff.api.columns import meta
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules

RULES = GroupRules(
    defaulters={"CustomResourceDefinition": default_crd},
    validators={"CustomResourceDefinition": validate_crd},
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

"""The coordination.k8s.io/v1 group: Leases (leader election, node heartbeats) — their
validation, kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError
from skiff.api.fieldchecks import as_dict, int_field, str_field
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import ObjView


def _validate_lease(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += str_field(spec, "holderIdentity", "spec.holderIdentity")
    errors += int_field(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", minimum=1,
                        detail="must be greater than 0")
    errors += int_field(spec, "leaseTransitions", "spec.leaseTransitions", minimum=0)
    for key in ("acquireTime", "renewTime"):
        errors += str_field(spec, key, f"spec.{key}")
    return errors


RULES = GroupRules(
    validators={"Lease": _validate_lease},
    columns={
        "Lease": [("NAME", meta("name")),
                  ("HOLDER", lambda o: str(o.get("spec", {}).get("holderIdentity", ""))),
                  ("AGE", age_column)],
    },
    schemas={
        "Lease": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                        "leaseTransitions", "strategy", "preferredHolder"),
        ),
    },
)

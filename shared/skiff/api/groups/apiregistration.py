"""The apiregistration.k8s.io/v1 group (SPEC EX8): APIServices, which register an extension
apiserver for a group/version (the aggregation layer) — validation, kubectl's columns."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import ObjView


def _validate_api_service(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return []


RULES = GroupRules(
    validators={"APIService": _validate_api_service},
    columns={
        "APIService": [("NAME", meta("name")),
                       ("SERVICE", lambda o: "/".join(
                           str((o.get("spec", {}).get("service") or {}).get(k, ""))
                           for k in ("namespace", "name")) if (o.get("spec") or {}).get(
                               "service") else "Local"),
                       ("AVAILABLE", lambda o: next(
                           (str(c.get("status")) for c in (o.get("status") or {}).get(
                               "conditions") or [] if c.get("type") == "Available"),
                           "Unknown")),
                       ("AGE", age_column)],
    },
    schemas={"APIService": fields(*TOP, "spec", "status", metadata=OBJECT_META)},
)

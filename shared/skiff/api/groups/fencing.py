"""Skiff's own skiff.io/v1 group: Fences (one per node, asking a fence agent to cut a
node off before its pods are recreated elsewhere) — defaults, validation (the agent, the
phases, what may not change), kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, required
from skiff.api.fieldchecks import as_dict, enum_field, immutable
from skiff.api.fielddefaults import child, set_default
from skiff.api.fieldschema import CONDITION, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView

FENCE_AGENTS = ["power", "network", "storage"]
FENCE_PHASES = ["Pending", "Fencing", "Fenced", "Failed", "Unfencing"]


def _validate_fence(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    if not spec.get("nodeName"):
        errors.append(required("spec.nodeName"))
    elif spec.get("nodeName") != obj.get("metadata", {}).get("name"):
        errors.append(invalid("spec.nodeName", spec.get("nodeName"),
                              "must equal metadata.name (one Fence per node, named after it)"))
    errors += enum_field(spec, "agent", "spec.agent", FENCE_AGENTS, is_required=True)
    status, errs = as_dict(obj.get("status"), "status")
    errors += errs + enum_field(status, "phase", "status.phase", FENCE_PHASES)
    if old is not None:
        for key in ("nodeName", "agent"):
            if spec.get(key) != old.get("spec", {}).get(key):
                errors += immutable(spec.get(key), old.get("spec", {}).get(key),
                                     f"spec.{key}")
    return errors

def _default_fence(obj: Obj) -> None:
    set_default(child(obj, "status"), "phase", "Pending")


RULES = GroupRules(
    defaulters={"Fence": _default_fence},
    validators={"Fence": _validate_fence},
    columns={
        "Fence": [
            ("NAME", meta("name")),
            ("AGENT", lambda o: str(o.get("spec", {}).get("agent", ""))),
            ("PHASE", lambda o: str(o.get("status", {}).get("phase", ""))),
            ("REASON", lambda o: str(o.get("spec", {}).get("reason", ""))),
            ("AGE", age_column)],
    },
    schemas={
        "Fence": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields("nodeName", "agent", "reason", "requestedBy"),
            status=fields("phase", "message", "confirmedAt", "podsDeleted",
                          conditions=ListOf(CONDITION)),
        ),
    },
)

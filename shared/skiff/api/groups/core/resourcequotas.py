"""ResourceQuota (core/v1): its validation, `kubectl get` columns and known fields.

What an object uses of a quota (the evaluators the apiserver's admission and the
resourcequota controller share) is `skiff.api.quotas`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, not_supported
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.quantity import parse_quantity
from skiff.api.quotas import SCOPES
from skiff.api.types import Obj


def _validate_resource_quota(obj: Mapping[str, Any],
                             old: Mapping[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.get("spec") or {}
    for key, amount in (spec.get("hard") or {}).items():
        try:
            if parse_quantity(amount) < 0:
                errors.append(invalid(f"spec.hard[{key}]", amount,
                                      "must be greater than or equal to 0"))
        except ValueError as exc:
            errors.append(invalid(f"spec.hard[{key}]", amount, str(exc)))
    for i, scope in enumerate(spec.get("scopes") or []):
        if scope not in SCOPES:
            errors.append(not_supported(f"spec.scopes[{i}]", scope, SCOPES))
    return errors


def _usage_column(part: str) -> Callable[[Obj], str]:
    """kubectl's REQUEST / LIMIT columns: `used/hard` of each resource, limits.* apart."""
    def column(quota: Obj) -> str:
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        keys = sorted(k for k in hard if k.startswith("limits.") == (part == "limit"))
        return ", ".join(f"{k}: {used.get(k, '0')}/{hard[k]}" for k in keys)
    return column


RULES = GroupRules(
    validators={"ResourceQuota": _validate_resource_quota},
    columns={"ResourceQuota": [("NAME", meta("name")), ("AGE", age_column),
                               ("REQUEST", _usage_column("request")),
                               ("LIMIT", _usage_column("limit"))]},
    schemas={"ResourceQuota": fields(*TOP, metadata=OBJECT_META,
                                     spec=fields("hard", "scopes", "scopeSelector"),
                                     status=fields("hard", "used"))},
)

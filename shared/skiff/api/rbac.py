"""Validation of the four RBAC kinds (rbac.authorization.k8s.io/v1, SPEC AU3).

Role and ClusterRole hold `rules` (PolicyRules); RoleBinding and ClusterRoleBinding bind
`subjects` to a `roleRef`. Evaluation lives in `skiff.auth`; this is only their shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.errors import FieldError, invalid, not_supported, required

Obj = Mapping[str, Any]

_SUBJECT_KINDS = ["Group", "ServiceAccount", "User"]


def _strings(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [invalid(path, value, "must be a list of strings")]
    return []


def _validate_rules(obj: Obj) -> list[FieldError]:
    rules = obj.get("rules")
    if rules is None:
        return []
    if not isinstance(rules, list):
        return [invalid("rules", rules, "must be a list of PolicyRules")]
    errors: list[FieldError] = []
    for i, rule in enumerate(rules):
        path = f"rules[{i}]"
        if not isinstance(rule, dict):
            errors.append(invalid(path, rule, "must be a PolicyRule"))
            continue
        for key in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"):
            errors += _strings(rule.get(key), f"{path}.{key}")
        if not rule.get("verbs"):
            errors.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        if rule.get("nonResourceURLs") and obj.get("kind") == "Role":
            errors.append(invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                  "namespaced rules cannot apply to non-resource URLs"))
        elif not rule.get("nonResourceURLs") and not rule.get("resources"):
            errors.append(required(f"{path}.resources",
                                   "resource rules must supply at least one resource"))
    return errors


def validate_role(obj: Obj, old: Obj | None) -> list[FieldError]:
    return _validate_rules(obj)


def validate_binding(obj: Obj, old: Obj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    ref = obj.get("roleRef")
    allowed = ["ClusterRole"] if obj.get("kind") == "ClusterRoleBinding" \
        else ["ClusterRole", "Role"]
    if not isinstance(ref, dict):
        errors.append(required("roleRef"))
    else:
        if ref.get("kind") not in allowed:
            errors.append(not_supported("roleRef.kind", ref.get("kind"), allowed))
        if not ref.get("name"):
            errors.append(required("roleRef.name"))
        if old is not None and ref != old.get("roleRef"):
            errors.append(invalid("roleRef", ref, "cannot change roleRef"))
    subjects = obj.get("subjects") or []
    if not isinstance(subjects, list):
        return [*errors, invalid("subjects", subjects, "must be a list of subjects")]
    for i, subject in enumerate(subjects):
        path = f"subjects[{i}]"
        if not isinstance(subject, dict):
            errors.append(invalid(path, subject, "must be a subject"))
            continue
        if subject.get("kind") not in _SUBJECT_KINDS:
            errors.append(not_supported(f"{path}.kind", subject.get("kind"), _SUBJECT_KINDS))
        if not subject.get("name"):
            errors.append(required(f"{path}.name"))
    return errors

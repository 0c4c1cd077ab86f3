"""The rbac.authorization.k8s.io/v1 group (SPEC AU3): validation and kubectl's columns of
Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.

Role and ClusterRole hold `rules` (PolicyRules); RoleBinding and ClusterRoleBinding bind
`subjects` to a `roleRef`. Evaluation lives in `skiff.auth`; this is only their shape.
"""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.fieldchecks import string_list
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView

_SUBJECT_KINDS = ["Group", "ServiceAccount", "User"]


def _validate_rules(obj: ObjView) -> list[FieldError]:
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
            errors += string_list(rule.get(key), f"{path}.{key}")
        if not rule.get("verbs"):
            errors.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        if rule.get("nonResourceURLs") and obj.get("kind") == "Role":
            errors.append(invalid(f"{path}.nonResourceURLs", rule["nonResourceURLs"],
                                  "namespaced rules cannot apply to non-resource URLs"))
        elif not rule.get("nonResourceURLs") and not rule.get("resources"):
            errors.append(required(f"{path}.resources",
                                   "resource rules must supply at least one resource"))
    return errors


def validate_role(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return _validate_rules(obj)


def validate_binding(obj: ObjView, old: ObjView | None) -> list[FieldError]:
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


def _role_ref(o: Obj) -> str:
    ref = o.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def _subjects(o: Obj, kind: str) -> str:
    """A binding's subjects of one kind, as kubectl lists them (`ns/name` for accounts)."""
    names = [f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount"
             else str(s.get("name", "")) for s in o.get("subjects") or []
             if s.get("kind") == kind]
    return ", ".join(names)


RULES = GroupRules(
    validators={"Role": validate_role, "ClusterRole": validate_role,
                "RoleBinding": validate_binding, "ClusterRoleBinding": validate_binding},
    columns={
        "Role": [("NAME", meta("name")), ("CREATED AT", meta("creationTimestamp"))],
        "ClusterRole": [("NAME", meta("name")), ("CREATED AT", meta("creationTimestamp"))],
        "RoleBinding": [("NAME", meta("name")), ("ROLE", lambda o: _role_ref(o)),
                        ("AGE", age_column)],
        "ClusterRoleBinding": [("NAME", meta("name")), ("ROLE", lambda o: _role_ref(o)),
                               ("AGE", age_column)],
    },
    wide={
        "RoleBinding": [("USERS", lambda o: _subjects(o, "User")),
                        ("GROUPS", lambda o: _subjects(o, "Group")),
                        ("SERVICEACCOUNTS", lambda o: _subjects(o, "ServiceAccount"))],
        "ClusterRoleBinding": [("USERS", lambda o: _subjects(o, "User")),
                               ("GROUPS", lambda o: _subjects(o, "Group")),
                               ("SERVICEACCOUNTS", lambda o: _subjects(o, "ServiceAccount"))],
    },
)

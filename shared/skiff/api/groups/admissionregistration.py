"""The admissionregistration.k8s.io/v1 group (SPEC EX6, EX7): Mutating and Validating
webhook configurations, ValidatingAdmissionPolicies and their bindings — validation,
defaults, kubectl's columns."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.admissionpolicies import (
    default_binding,
    default_policy,
    param_kind_column,
    param_ref_column,
    validate_binding,
    validate_policy,
)
from skiff.api.groups.webhookconfigs import (
    default_mutating,
    default_validating,
    validate_mutating,
    validate_validating,
)

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
         "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")

RULES = GroupRules(
    defaulters={"MutatingWebhookConfiguration": default_mutating,
                "ValidatingWebhookConfiguration": default_validating,
                "ValidatingAdmissionPolicy": default_policy,
                "ValidatingAdmissionPolicyBinding": default_binding},
    validators={"MutatingWebhookConfiguration": validate_mutating,
                "ValidatingWebhookConfiguration": validate_validating,
                "ValidatingAdmissionPolicy": validate_policy,
                "ValidatingAdmissionPolicyBinding": validate_binding},
    columns={
        "MutatingWebhookConfiguration": [
            ("NAME", meta("name")),
            ("WEBHOOKS", lambda o: str(len(o.get("webhooks") or []))),
            ("AGE", age_column)],
        "ValidatingWebhookConfiguration": [
            ("NAME", meta("name")),
            ("WEBHOOKS", lambda o: str(len(o.get("webhooks") or []))),
            ("AGE", age_column)],
        "ValidatingAdmissionPolicy": [
            ("NAME", meta("name")),
            ("VALIDATIONS", lambda o: str(len((o.get("spec") or {}).get("validations") or []))),
            ("PARAMKIND", param_kind_column),
            ("AGE", age_column)],
        "ValidatingAdmissionPolicyBinding": [
            ("NAME", meta("name")),
            ("POLICYNAME", lambda o: str((o.get("spec") or {}).get("policyName") or "")),
            ("PARAMREF", param_ref_column),
            ("AGE", age_column)],
    },
    schemas={
        **{kind: fields(*TOP, "webhooks", metadata=OBJECT_META) for kind in KINDS[:2]},
        **{kind: fields(*TOP, "spec", "status", metadata=OBJECT_META) for kind in KINDS[2:]},
    },
)

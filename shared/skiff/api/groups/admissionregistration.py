"""The admissionregistration.k8s.io/v1 group (SPEC EX6, EX7): Mutating and Validating
webhook configurations, ValidatingAdmissionPolicies and their bindings — validation,
defaults, kubectl's columns."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.webhookconfigs import (
    default_mutating,
    default_validating,
    validate_mutating,
    validate_validating,
)
from skiff.api.types import ObjView

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
         "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def _no_rules(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return []


RULES = GroupRules(
    defaulters={"MutatingWebhookConfiguration": default_mutating,
                "ValidatingWebhookConfiguration": default_validating},
    validators={**{kind: _no_rules for kind in KINDS},
                "MutatingWebhookConfiguration": validate_mutating,
                "ValidatingWebhookConfiguration": validate_validating},
    columns={
        "MutatingWebhookConfiguration": [
            ("NAME", meta("name")),
            ("WEBHOOKS", lambda o: str(len(o.get("webhooks") or []))),
            ("AGE", age_column)],
        "ValidatingWebhookConfiguration": [
            ("NAME", meta("name")),
            ("WEBHOOKS", lambda o: str(len(o.get("webhooks") or []))),
            ("AGE", age_column)],
    },
    schemas={
        **{kind: fields(*TOP, "webhooks", metadata=OBJECT_META) for kind in KINDS[:2]},
        **{kind: fields(*TOP, "spec", "status", metadata=OBJECT_META) for kind in KINDS[2:]},
    },
)

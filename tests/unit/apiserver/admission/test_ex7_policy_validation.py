"""SPEC EX7: ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding v1 defaults and
validation, with Kubernetes' messages and field paths — expressions compiled at write time
with the variables Kubernetes declares for each kind of expression."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.types import Obj

RULES = [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
          "resources": ["deployments"]}]


def _policy(spec: Obj, name: str = "demo-policy.example.com") -> Obj:
    obj: Obj = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                "spec": {"matchConstraints": {"resourceRules": RULES},
                         "validations": [{"expression": "object.spec.replicas <= 5"}],
                         **spec}}
    apply_defaults(obj)
    return obj


def _binding(spec: Obj) -> Obj:
    obj: Obj = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "demo-binding"},
                "spec": {"policyName": "demo-policy.example.com",
                         "validationActions": ["Deny"], **spec}}
    apply_defaults(obj)
    return obj


def _errors(obj: Obj, old: Obj | None = None) -> list[str]:
    return [str(e) for e in validate(obj, old=old)]


def test_ex7_policy_v1_defaults() -> None:
    spec = _policy({})["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"] == {
        "resourceRules": [{**RULES[0], "scope": "*"}], "matchPolicy": "Equivalent",
        "namespaceSelector": {}, "objectSelector": {}}
    binding = _binding({"matchResources": {"namespaceSelector": {"matchLabels": {"a": "b"}}}})
    assert binding["spec"]["matchResources"] == {
        "namespaceSelector": {"matchLabels": {"a": "b"}}, "matchPolicy": "Equivalent",
        "objectSelector": {}}


def test_ex7_the_documentation_examples_are_valid() -> None:
    assert _errors(_policy({})) == []
    assert _errors(_policy({
        "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
        "validations": [{"expression": "object.spec.replicas <= params.maxReplicas",
                         "messageExpression": "'object.spec.replicas must be no greater "
                                              "than ' + string(params.maxReplicas)",
                         "reason": "Invalid"}],
        "matchConditions": [{"name": "exclude-leases",
                             "expression": "!(request.resource.group == "
                                           "'coordination.k8s.io' && "
                                           "request.resource.resource == 'leases')"}],
        "variables": [{"name": "environment",
                       "expression": "'environment' in namespaceObject.metadata.labels ? "
                                     "namespaceObject.metadata.labels['environment'] : "
                                     "'prod'"},
                      {"name": "exempt", "expression": "variables.environment == 'test'"}],
        "auditAnnotations": [{"key": "high-replica-count",
                              "valueExpression": "'Deployment spec.replicas set to ' + "
                                                 "string(object.spec.replicas)"}]})) == []
    assert _errors(_policy({"validations": [{"expression": "variables.exempt"}],
                            "variables": [{"name": "exempt",
                                           "expression": "object.metadata.name == 'x'"}]})) \
        == []
    assert _errors(_binding({"paramRef": {"name": "replica-limit-test.example.com",
                                          "namespace": "default",
                                          "parameterNotFoundAction": "Deny"},
                             "matchResources": {"namespaceSelector": {"matchLabels": {
                                 "environment": "test"}}}})) == []


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"validations": [{"expression": "object.spec.replicas <="}]},
                 'spec.validations[0].expression: Invalid value: "object.spec.replicas <=": '
                 "compilation failed: ERROR: <input>:1:24: Syntax error:", id="syntax"),
    pytest.param({"validations": [{"expression": "params.max > 1"}]},
                 'spec.validations[0].expression: Invalid value: "params.max > 1": '
                 "compilation failed: ERROR: <input>:1:", id="params-without-paramKind"),
    pytest.param({"validations": [{"expression": "object.spec.paused"}]},
                 'spec.validations[0].expression: Invalid value: "object.spec.paused": '
                 "must evaluate to bool but got dyn", id="not-bool"),
    pytest.param({"validations": [{"expression": "true", "messageExpression": "1"}]},
                 'spec.validations[0].messageExpression: Invalid value: "1": must evaluate '
                 "to string but got int", id="message-not-string"),
    pytest.param({"validations": [{"expression": "true", "messageExpression":
                                   "authorizer.path('/x').check('get').reason()"}]},
                 "undeclared reference to 'authorizer", id="no-authorizer-in-messages"),
    pytest.param({"validations": [{"expression": "true", "message": "two\nlines"}]},
                 'spec.validations[0].message: Invalid value: "two\\nlines": message must '
                 "not contain line breaks", id="multi-line-message"),
    pytest.param({"validations": [{"expression": "true", "reason": "Conflict"}]},
                 'spec.validations[0].reason: Unsupported value: "Conflict": supported '
                 'values: "Forbidden", "Invalid", "RequestEntityTooLarge"', id="reason"),
    pytest.param({"validations": [], "auditAnnotations": []},
                 "spec.validations: Required value: validations or auditAnnotations must "
                 "contain at least one item", id="nothing-to-do"),
    pytest.param({"failurePolicy": "Sometimes"},
                 'spec.failurePolicy: Unsupported value: "Sometimes": supported values: '
                 '"Fail", "Ignore"', id="failure-policy"),
    pytest.param({"matchConstraints": {"resourceRules": []}},
                 "spec.matchConstraints.resourceRules: Required value", id="no-rules"),
    pytest.param({"matchConstraints": {"resourceRules": [{**RULES[0], "operations": []}]}},
                 "spec.matchConstraints.resourceRules[0].operations: Required value",
                 id="rule-operations"),
    pytest.param({"matchConstraints": {"resourceRules": RULES, "matchPolicy": "Fuzzy"}},
                 'spec.matchConstraints.matchPolicy: Unsupported value: "Fuzzy"',
                 id="match-policy"),
    pytest.param({"paramKind": {"apiVersion": "a/b/c", "kind": "X"}},
                 'spec.paramKind.apiVersion: Invalid value: "a/b/c": unexpected '
                 "GroupVersion string: a/b/c", id="param-kind-version"),
    pytest.param({"paramKind": {"apiVersion": "v1"}},
                 "spec.paramKind.kind: Required value", id="param-kind-kind"),
    pytest.param({"matchConditions": [{"name": "c", "expression": "object.metadata.name"}]},
                 'spec.matchConditions[0].expression: Invalid value: "object.metadata.name":'
                 " must evaluate to bool but got dyn", id="match-condition-not-bool"),
    pytest.param({"variables": [{"name": "in", "expression": "1"}]},
                 'spec.variables[0].name: Invalid value: "in": name is not a valid CEL '
                 "identifier", id="variable-name"),
    pytest.param({"auditAnnotations": [{"key": "k", "valueExpression": "1"}]},
                 'spec.auditAnnotations[0].valueExpression: Invalid value: "1": must '
                 "evaluate to one of [string null_type] but got int", id="annotation-type"),
])
def test_ex7_policy_is_refused_with_kubernetes_message(spec: Obj, expected: str) -> None:
    errors = _errors(_policy(spec))
    assert any(e.startswith(expected) or expected in e for e in errors), errors


def test_ex7_unchanged_match_conditions_are_not_compiled_again() -> None:
    old = _policy({"matchConditions": [{"name": "c", "expression": "object.x"}]})
    new = _policy({"matchConditions": [{"name": "c", "expression": "object.x"}],
                   "validations": [{"expression": "true"}]})
    assert _errors(new, old) == []
    assert _errors(new) != []


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"validationActions": []},
                 "spec.validationActions: Required value: at least one validation action "
                 "is required", id="no-actions"),
    pytest.param({"validationActions": ["Deny", "Warn"]},
                 'spec.validationActions: Invalid value: ["Deny", "Warn"]: must not contain '
                 "both Deny and Warn", id="deny-and-warn"),
    pytest.param({"validationActions": ["Audit", "Audit"]},
                 'spec.validationActions[1]: Duplicate value: "Audit"', id="duplicate"),
    pytest.param({"validationActions": ["Block"]},
                 'spec.validationActions[0]: Unsupported value: "Block": supported values: '
                 '"Audit", "Deny", "Warn"', id="unknown-action"),
    pytest.param({"policyName": ""}, "spec.policyName: Required value", id="policy-name"),
    pytest.param({"paramRef": {"name": "x"}},
                 "spec.paramRef.parameterNotFoundAction: Required value", id="not-found"),
    pytest.param({"paramRef": {"parameterNotFoundAction": "Deny"}},
                 "spec.paramRef: Required value: one of name or selector must be specified",
                 id="name-or-selector"),
    pytest.param({"paramRef": {"name": "x", "selector": {},
                               "parameterNotFoundAction": "Deny"}},
                 "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                 id="name-and-selector"),
    pytest.param({"paramRef": {"name": "a/b", "parameterNotFoundAction": "Deny"}},
                 "spec.paramRef.name: Invalid value: \"a/b\": may not contain '/'",
                 id="param-name"),
    pytest.param({"matchResources": {"matchPolicy": "Fuzzy"}},
                 'spec.matchResouces.matchPolicy: Unsupported value: "Fuzzy"',
                 id="kubernetes-spells-matchResouces"),
])
def test_ex7_binding_is_refused_with_kubernetes_message(spec: Obj, expected: str) -> None:
    errors = _errors(_binding(spec))
    assert any(e.startswith(expected) for e in errors), errors


def _table_row(obj: Obj) -> Any:
    from skiff.api.groups.admissionregistration import RULES as GROUP
    return [column(obj) for _, column in GROUP.columns[obj["kind"]][:3]]


def test_ex7_kubectl_columns() -> None:
    assert _table_row(_policy({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}})) == [
        "demo-policy.example.com", "1", "v1/ConfigMap"]
    assert _table_row(_binding({"paramRef": {"name": "limits",
                                             "parameterNotFoundAction": "Deny"}})) == [
        "demo-binding", "demo-policy.example.com", "*/limits"]

"""SPEC EX6: Mutating/ValidatingWebhookConfigurations are defaulted and validated as
Kubernetes' `admissionregistration/v1` defaults and validation do, with its messages and
field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.groups.webhookconfigs import validate_configuration
from skiff.api.types import Obj


def _config(kind: str = "ValidatingWebhookConfiguration", **hook: Any) -> Obj:
    webhook: Obj = {
        "name": "check.example.com", "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:9443/check"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods"]}],
    }
    webhook.update(hook)
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "cfg"}, "webhooks": [webhook]}


def _errors(obj: Obj, old: Obj | None = None) -> list[str]:
    obj = copy.deepcopy(obj)
    apply_defaults(obj)
    return [str(e) for e in validate(obj, old=old)]


def test_ex6_mutating_webhook_gets_v1_defaults() -> None:
    obj = _config("MutatingWebhookConfiguration",
                  clientConfig={"service": {"namespace": "ns", "name": "svc"}})
    apply_defaults(obj)
    hook = obj["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
    assert hook["timeoutSeconds"] == 10
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443
    assert validate(obj) == []


def test_ex6_validating_webhook_has_no_reinvocation_policy() -> None:
    obj = _config()
    apply_defaults(obj)
    assert "reinvocationPolicy" not in obj["webhooks"][0]
    assert validate(obj) == []


@pytest.mark.parametrize(("hook", "message"), [
    pytest.param({"sideEffects": None}, "webhooks[0].sideEffects: Required value: must "
                 "specify one of None, NoneOnDryRun", id="side-effects-required"),
    pytest.param({"sideEffects": "Some"}, 'webhooks[0].sideEffects: Unsupported value: '
                 '"Some": supported values: "None", "NoneOnDryRun"', id="side-effects-some"),
    pytest.param({"admissionReviewVersions": None}, "webhooks[0].admissionReviewVersions: "
                 "Required value: must specify one of v1, v1beta1", id="review-versions"),
    pytest.param({"admissionReviewVersions": ["v2"]}, 'webhooks[0].admissionReviewVersions: '
                 'Invalid value: ["v2"]: must include at least one of v1, v1beta1',
                 id="review-versions-v1"),
    pytest.param({"timeoutSeconds": 31}, "webhooks[0].timeoutSeconds: Invalid value: 31: the "
                 "timeout value must be between 1 and 30 seconds", id="timeout"),
    pytest.param({"failurePolicy": "Maybe"}, 'webhooks[0].failurePolicy: Unsupported value: '
                 '"Maybe": supported values: "Fail", "Ignore"', id="failure-policy"),
    pytest.param({"matchPolicy": "Close"}, 'webhooks[0].matchPolicy: Unsupported value: '
                 '"Close": supported values: "Equivalent", "Exact"', id="match-policy"),
    pytest.param({"name": "check"}, 'webhooks[0].name: Invalid value: "check": should be a '
                 "domain with at least three segments separated by dots", id="name-qualified"),
    pytest.param({"clientConfig": {}}, "webhooks[0].clientConfig: Required value: exactly "
                 "one of url or service is required", id="client-config-none"),
    pytest.param({"clientConfig": {"url": "http://127.0.0.1/x"}},
                 'webhooks[0].clientConfig.url: Invalid value: "http": \'https\' is the only '
                 "allowed URL scheme; desired format: https://host[/path]", id="url-https"),
    pytest.param({"clientConfig": {"url": "https://h.example.com/x?a=b"}},
                 'webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are '
                 "not permitted in the URL", id="url-query"),
    pytest.param({"clientConfig": {"service": {"name": "svc"}}},
                 "webhooks[0].clientConfig.service.namespace: Required value",
                 id="service-namespace"),
    pytest.param({"clientConfig": {"service": {"name": "s", "namespace": "n", "port": 0}}},
                 "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: "
                 "must be between 1 and 65535, inclusive", id="service-port"),
    pytest.param({"clientConfig": {"service": {"name": "s", "namespace": "n",
                                               "path": "x"}}},
                 'webhooks[0].clientConfig.service.path: Invalid value: "x": must start with '
                 "a '/'", id="service-path"),
    pytest.param({"rules": [{"operations": ["PATCH"], "apiGroups": [""],
                             "apiVersions": ["v1"], "resources": ["pods"]}]},
                 'webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": supported '
                 'values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"', id="operation"),
    pytest.param({"rules": [{"operations": ["*", "CREATE"], "apiGroups": [""],
                             "apiVersions": ["v1"], "resources": ["pods"]}]},
                 'webhooks[0].rules[0].operations: Invalid value: ["*", "CREATE"]: if \'*\' '
                 "is present, must not specify other operations", id="operation-wildcard"),
    pytest.param({"rules": [{"operations": ["CREATE"], "apiVersions": ["v1"],
                             "resources": ["pods"]}]},
                 "webhooks[0].rules[0].apiGroups: Required value", id="api-groups"),
    pytest.param({"rules": [{"operations": ["CREATE"], "apiGroups": [""],
                             "apiVersions": ["v1"], "resources": ["*/*", "pods"]}]},
                 'webhooks[0].rules[0].resources: Invalid value: ["*/*", "pods"]: if \'*/*\' '
                 "is present, must not specify other resources", id="resources-double"),
    pytest.param({"rules": [{"operations": ["CREATE"], "apiGroups": [""],
                             "apiVersions": ["v1"], "resources": ["pods"],
                             "scope": "Global"}]},
                 'webhooks[0].rules[0].scope: Unsupported value: "Global": supported values: '
                 '"*", "Cluster", "Namespaced"', id="scope"),
    pytest.param({"namespaceSelector": {"matchExpressions": [{"key": "a",
                                                              "operator": "In"}]}},
                 "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: "
                 "must be specified when `operator` is 'In' or 'NotIn'", id="ns-selector"),
    pytest.param({"matchConditions": [{"expression": "true"}]},
                 "webhooks[0].matchConditions[0].name: Required value", id="condition-name"),
])
def test_ex6_invalid_webhooks_are_refused_with_kubernetes_messages(
        hook: Obj, message: str) -> None:
    assert message in _errors(_config(**hook))


def test_ex6_webhook_names_are_unique_in_a_configuration() -> None:
    obj = _config()
    obj["webhooks"].append(copy.deepcopy(obj["webhooks"][0]))
    assert _errors(obj) == ['webhooks[1].name: Duplicate value: "check.example.com"']


def test_ex6_reinvocation_policy_is_checked_on_mutating_webhooks() -> None:
    assert _errors(_config("MutatingWebhookConfiguration", reinvocationPolicy="Always")) == [
        'webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: '
        '"IfNeeded", "Never"']


def test_ex6_an_update_keeps_side_effects_the_old_object_already_had() -> None:
    old = _config(sideEffects="Unknown")
    assert validate_configuration(_config(sideEffects="Some"), old, mutating=False) == []
    assert validate_configuration(_config(sideEffects="Some"), _config(),
                                  mutating=False) != []


def test_ex6_match_condition_that_does_not_compile_is_invalid() -> None:
    errors = validate_configuration(
        _config(matchConditions=[{"name": "c", "expression": "object.("}]), None,
        mutating=False, check=lambda expr: "compilation failed: syntax error")
    assert [str(e) for e in errors] == [
        'webhooks[0].matchConditions[0].expression: Invalid value: "object.(": '
        "compilation failed: syntax error"]

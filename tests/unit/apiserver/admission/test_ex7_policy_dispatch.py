"""SPEC EX7: what the ValidatingAdmissionPolicy plugin decides — policies matched through
their matchConstraints and their bindings' matchResources, CEL over object / oldObject /
request / params / namespaceObject / variables, Deny / Warn / Audit, params by name and by
selector with parameterNotFoundAction, failurePolicy on evaluation and configuration
errors, and Kubernetes' messages (the real apiserver and kubectl are
tests/integration/test_ex7_admission_policies.py)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from skiff.api import ApiError, Reason, apply_defaults, lookup, validate
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Operation
from skiff.apiserver.admission.policy import (
    ParamSource,
    PolicySource,
    ValidatingAdmissionPolicyAdmission,
)
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

DEPLOYMENTS = {"apiGroups": ["apps"], "apiVersions": ["v1"],
               "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}


def policy(name: str, *validations: Obj, rules: list[Obj] | None = None, **spec: Any) -> Obj:
    obj: Obj = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
                "spec": {"matchConstraints": {"resourceRules": rules or [DEPLOYMENTS]},
                         "validations": list(validations), **spec}}
    apply_defaults(obj)
    assert validate(obj) == [], validate(obj)
    return obj


def binding(name: str, policy_name: str, *actions: str, **spec: Any) -> Obj:
    obj: Obj = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
                "spec": {"policyName": policy_name,
                         "validationActions": list(actions or ("Deny",)), **spec}}
    apply_defaults(obj)
    assert validate(obj) == [], validate(obj)
    return obj


def deployment(name: str = "web", replicas: int = 3, *, namespace: str = "team",
               labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"replicas": replicas}}


class World:
    """Objects in a memory store, and the plugin reading them."""

    def __init__(self) -> None:
        self.storage = MemoryStorage()
        cache = WatchCache(self.storage)
        self.plugin = ValidatingAdmissionPolicyAdmission(
            PolicySource(Lookup("validatingadmissionpolicies", self.storage, cache),
                         Lookup("validatingadmissionpolicybindings", self.storage, cache)),
            namespaces=Lookup("namespaces", self.storage, cache),
            params=ParamSource(self.storage, cache))

    async def add(self, *objects: Obj) -> World:
        for obj in objects:
            info = lookup(obj["kind"])
            meta = obj["metadata"]
            await self.storage.create(storage_key(info, meta.get("namespace"), meta["name"]),
                                      obj)
        return self

    async def validate(self, obj: Obj | None, *, old: Obj | None = None,
                       operation: Operation = Operation.CREATE) -> list[str]:
        source = obj or old
        assert source is not None
        attrs = Attributes(lookup(source["kind"]), copy.deepcopy(obj) if obj else {},
                           old, operation)
        return await self.plugin.validate(attrs)


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}


async def world(*objects: Obj) -> World:
    return await World().add(namespace("team", env="prod"), namespace("dev", env="test"),
                             *objects)


REPLICAS = {"expression": "object.spec.replicas <= 5"}


async def test_ex7_deny_refuses_with_kubernetes_message_and_422() -> None:
    w = await world(policy("demo-policy.example.com", REPLICAS),
                    binding("demo-binding-test.example.com", "demo-policy.example.com"))
    assert await w.validate(deployment(replicas=5)) == []
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(replicas=6))
    assert err.value.reason == Reason.INVALID and err.value.code == 422
    assert err.value.message == (
        'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy '
        "'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied "
        "request: failed expression: object.spec.replicas <= 5")


@pytest.mark.parametrize(("validation", "message", "reason"), [
    pytest.param({"message": "too many replicas"}, "too many replicas", Reason.INVALID,
                 id="message"),
    pytest.param({"message": "m", "messageExpression":
                  "'replicas ' + string(object.spec.replicas) + ' > 5'"},
                 "replicas 9 > 5", Reason.INVALID, id="messageExpression-wins"),
    pytest.param({"message": "fallback", "messageExpression": "object.metadata.name + ''",
                  "reason": "Forbidden"}, "web", Reason.FORBIDDEN, id="reason-forbidden"),
    pytest.param({"message": "fallback", "messageExpression": "string(object.nope)"},
                 "fallback", Reason.INVALID, id="failing-messageExpression-falls-back"),
    pytest.param({"messageExpression": "'  '"},
                 "failed expression: object.spec.replicas <= 5", Reason.INVALID,
                 id="blank-message-falls-back-to-expression"),
])
async def test_ex7_denial_message_and_reason(validation: Obj, message: str,
                                             reason: Reason) -> None:
    w = await world(policy("p", {**REPLICAS, **validation}), binding("b", "p"))
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(replicas=9))
    assert err.value.reason == reason
    assert err.value.message.endswith(f"denied request: {message}")


async def test_ex7_warn_adds_a_warning_and_audit_only_logs(
        caplog: pytest.LogCaptureFixture) -> None:
    w = await world(policy("p", {**REPLICAS, "message": "at most 5"}),
                    binding("warn", "p", "Warn", "Audit"))
    with caplog.at_level(logging.WARNING):
        warnings = await w.validate(deployment(replicas=7))
    assert warnings == ["Validation failed for ValidatingAdmissionPolicy 'p' with binding "
                        "'warn': at most 5"]
    assert any(getattr(r, "annotation", "") ==
               "validation.policy.admission.k8s.io/validation_failure" for r in caplog.records)
    audit = await world(policy("p", REPLICAS), binding("audit", "p", "Audit"))
    assert await audit.validate(deployment(replicas=7)) == []


async def test_ex7_binding_match_resources_scope_the_policy_by_namespace_label() -> None:
    w = await world(policy("p", REPLICAS), binding("b", "p", matchResources={
        "namespaceSelector": {"matchLabels": {"env": "test"}}}))
    assert await w.validate(deployment(replicas=9, namespace="team")) == []
    with pytest.raises(ApiError):
        await w.validate(deployment(replicas=9, namespace="dev"))


@pytest.mark.parametrize(("constraints", "matched"), [
    pytest.param({}, True, id="rules-only"),
    pytest.param({"objectSelector": {"matchLabels": {"checked": "yes"}}}, False,
                 id="object-selector-misses"),
    pytest.param({"excludeResourceRules": [{**DEPLOYMENTS, "resourceNames": ["web"]}]},
                 False, id="excluded-by-name"),
    pytest.param({"excludeResourceRules": [{**DEPLOYMENTS, "resourceNames": ["other"]}]},
                 True, id="excluded-other-name"),
    pytest.param({"resourceRules": [{**DEPLOYMENTS, "resourceNames": ["other"]}]}, False,
                 id="resource-names-miss"),
    pytest.param({"resourceRules": [{**DEPLOYMENTS, "operations": ["UPDATE"]}]}, False,
                 id="operation-misses"),
])
async def test_ex7_match_constraints(constraints: Obj, matched: bool) -> None:
    p = policy("p", REPLICAS)
    p["spec"]["matchConstraints"].update(constraints)
    apply_defaults(p)
    w = await world(p, binding("b", "p"))
    if matched:
        with pytest.raises(ApiError):
            await w.validate(deployment(replicas=9))
    else:
        assert await w.validate(deployment(replicas=9)) == []


async def test_ex7_match_conditions_skip_the_policy_when_false() -> None:
    w = await world(policy("p", REPLICAS, matchConditions=[
        {"name": "not-exempt", "expression": "!has(object.metadata.labels) || "
                                             "!('exempt' in object.metadata.labels)"}]),
        binding("b", "p"))
    assert await w.validate(deployment(replicas=9, labels={"exempt": "1"})) == []
    with pytest.raises(ApiError):
        await w.validate(deployment(replicas=9))


def _config_map(name: str, namespace: str = "team", **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"role": "limits"}}, "data": data}


PARAM_POLICY = policy(
    "replica-limit", {"expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                      "messageExpression": "'object.spec.replicas must be no greater than ' "
                                           "+ params.data.maxReplicas"},
    paramKind={"apiVersion": "v1", "kind": "ConfigMap"})


async def test_ex7_params_by_name_from_the_request_namespace_or_paramref() -> None:
    w = await world(PARAM_POLICY, _config_map("limits", maxReplicas="3"),
                    binding("by-name", "replica-limit", paramRef={
                        "name": "limits", "parameterNotFoundAction": "Deny"}))
    assert await w.validate(deployment(replicas=3)) == []
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(replicas=4))
    assert err.value.message.endswith(
        "denied request: object.spec.replicas must be no greater than 3")
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(replicas=1, namespace="dev"))
    assert err.value.message == (
        'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy \'replica-limit\' '
        "with binding 'by-name' denied request: failed to configure binding: no params "
        "found for policy binding with `Deny` parameterNotFoundAction")


async def test_ex7_params_not_found_with_allow_admit() -> None:
    w = await world(PARAM_POLICY, binding("allow", "replica-limit", paramRef={
        "name": "absent", "namespace": "team", "parameterNotFoundAction": "Allow"}))
    assert await w.validate(deployment(replicas=100)) == []


async def test_ex7_params_by_selector_are_each_evaluated() -> None:
    w = await world(PARAM_POLICY, _config_map("a", maxReplicas="10"),
                    _config_map("b", maxReplicas="2"),
                    binding("sel", "replica-limit", "Warn", paramRef={
                        "selector": {"matchLabels": {"role": "limits"}},
                        "parameterNotFoundAction": "Deny"}))
    warnings = await w.validate(deployment(replicas=5))
    assert warnings == ["Validation failed for ValidatingAdmissionPolicy 'replica-limit' "
                        "with binding 'sel': object.spec.replicas must be no greater than 2"]


async def test_ex7_unknown_param_kind_follows_failure_policy() -> None:
    bad = policy("bad", REPLICAS, paramKind={"apiVersion": "example.com/v1",
                                             "kind": "Nope"})
    w = await world(bad, binding("b", "bad", paramRef={"name": "x",
                                                       "parameterNotFoundAction": "Deny"}))
    with pytest.raises(ApiError) as err:
        await w.validate(deployment())
    assert err.value.message.endswith(
        "ValidatingAdmissionPolicy 'bad' denied request: failed to configure policy: failed "
        "to find resource referenced by paramKind: 'example.com/v1, Kind=Nope'")
    bad["spec"]["failurePolicy"] = "Ignore"
    ignoring = await world(bad, binding("b", "bad", paramRef={
        "name": "x", "parameterNotFoundAction": "Deny"}))
    assert await ignoring.validate(deployment()) == []


@pytest.mark.parametrize(("failure_policy", "refused"), [("Fail", True), ("Ignore", False)])
async def test_ex7_evaluation_error_follows_failure_policy(failure_policy: str,
                                                            refused: bool) -> None:
    w = await world(policy("p", {"expression": "object.spec.missing > 1"},
                           failurePolicy=failure_policy), binding("b", "p"))
    if not refused:
        assert await w.validate(deployment()) == []
        return
    with pytest.raises(ApiError) as err:
        await w.validate(deployment())
    assert err.value.message.endswith(
        "denied request: expression 'object.spec.missing > 1' resulted in error: no such "
        "key: missing")


async def test_ex7_request_old_object_and_namespace_object() -> None:
    w = await world(policy("p", {
        "expression": "request.operation != 'UPDATE' || "
                      "object.spec.replicas >= oldObject.spec.replicas",
        "message": "no scaling down"}, {
        "expression": "namespaceObject.metadata.labels.env == 'prod'",
        "message": "prod only"}, {
        "expression": "request.kind.kind == 'Deployment' && request.resource.group == 'apps'"
                      " && request.namespace == 'team' && request.name == 'web'"}),
        binding("b", "p"))
    assert await w.validate(deployment(replicas=4), old=deployment(replicas=3),
                            operation=Operation.UPDATE) == []
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(replicas=2), old=deployment(replicas=3),
                         operation=Operation.UPDATE)
    assert err.value.message.endswith("denied request: no scaling down")
    with pytest.raises(ApiError) as err:
        await w.validate(deployment(namespace="dev"))
    assert err.value.message.endswith("denied request: prod only")


async def test_ex7_delete_sees_a_null_object_and_the_old_one() -> None:
    rules = [{**DEPLOYMENTS, "operations": ["DELETE"]}]
    w = await world(policy("keep", {
        "expression": "object == null && oldObject.metadata.name != 'precious'",
        "message": "precious is kept"}, rules=rules), binding("b", "keep"))
    assert await w.validate(None, old=deployment("web"), operation=Operation.DELETE) == []
    with pytest.raises(ApiError) as err:
        await w.validate(None, old=deployment("precious"), operation=Operation.DELETE)
    assert err.value.message.startswith('deployments.apps "precious" is forbidden:')


async def test_ex7_variables_are_evaluated_lazily_and_composed() -> None:
    w = await world(policy("p", {"expression": "variables.ok"}, variables=[
        {"name": "broken", "expression": "object.nope.deeper == 1"},
        {"name": "replicas", "expression": "object.spec.replicas"},
        {"name": "ok", "expression": "variables.replicas <= 5"}]), binding("b", "p"))
    assert await w.validate(deployment(replicas=5)) == []
    with pytest.raises(ApiError):
        await w.validate(deployment(replicas=6))


async def test_ex7_policies_and_bindings_are_not_subject_to_policies() -> None:
    everything = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                   "resources": ["*"]}]
    w = await world(policy("no", {"expression": "false"}, rules=everything),
                    binding("b", "no"))
    assert await w.validate(policy("other", REPLICAS)) == []
    with pytest.raises(ApiError):
        await w.validate(_config_map("c"))


async def test_ex7_a_binding_without_its_policy_does_nothing() -> None:
    w = await world(binding("orphan", "missing"))
    assert await w.validate(deployment(replicas=100)) == []

"""SPEC EX6: what the webhook plugins do with the webhooks' answers — JSON patches applied
and re-validated, refusals with Kubernetes' message, failurePolicy on failed calls, dry run
and sideEffects, reinvocation, invalid responses — over a fake transport (the real HTTPS
call is tests/integration/test_ex6_admission_webhooks.py)."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from skiff.api import ApiError, Reason, lookup
from skiff.api.groups.webhookconfigs import validate_configuration
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.admission.chain import Chain
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.admission.webhook import (
    MutatingWebhookAdmission,
    ValidatingWebhookAdmission,
    WebhookSource,
)
from skiff.apiserver.admission.webhook.client import CallFailed
from skiff.apiserver.admission.webhook.hooks import Hook
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

Answer = Callable[[Hook, Obj], Any]


def allow(**response: Any) -> Answer:
    def answer(_hook: Hook, review: Obj) -> Any:
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True, **response}}
    return answer


def deny(message: str, code: int = 403) -> Answer:
    return allow(allowed=False, status={"code": code, "message": message})


def patch(*ops: Obj) -> Answer:
    encoded = base64.b64encode(json.dumps(list(ops)).encode()).decode()
    return allow(patchType="JSONPatch", patch=encoded)


def add_label(key: str, value: str) -> Answer:
    return patch({"op": "add", "path": f"/metadata/labels/{key}", "value": value})


class FakeCaller:
    """Answers each webhook by name; a name without an answer fails like a refused
    connection. Records the reviews sent."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, Obj]] = []

    async def __call__(self, hook: Hook, review: Obj) -> Any:
        self.sent.append((hook.name, review))
        answer = self.answers.get(hook.name)
        if answer is None:
            raise CallFailed('Post "https://127.0.0.1:1/x?timeout=10s": dial tcp '
                             "127.0.0.1:1: connect: connection refused")
        return answer(hook, review)


def _webhook(name: str, **fields: Any) -> Obj:
    return {"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/x"}, "failurePolicy": "Fail",
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "*"}],
            **fields}


async def _plugins(configs: dict[str, list[Obj]], caller: FakeCaller, *, mutating: bool
                   ) -> MutatingWebhookAdmission | ValidatingWebhookAdmission:
    storage = MemoryStorage()
    cache = WatchCache(storage)
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    info = lookup(kind)
    for name, hooks in configs.items():
        await storage.create(storage_key(info, None, name), {
            "apiVersion": info.api_version, "kind": kind, "metadata": {"name": name},
            "webhooks": hooks})
    await storage.create(storage_key(lookup("namespaces"), None, "team"), {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team", "labels": {"env": "prod"}}})
    source = WebhookSource(Lookup(info.resource, storage, cache), mutating=mutating)
    namespaces = Lookup("namespaces", storage, cache)
    if mutating:
        return MutatingWebhookAdmission(source, namespaces=namespaces, caller=caller)
    return ValidatingWebhookAdmission(source, namespaces=namespaces, caller=caller)


def _attrs(*, dry_run: bool = False, revalidated: list[Obj] | None = None) -> Attributes:
    obj: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "team", "labels": {"a": "1"}},
                "data": {"k": "v"}}

    def revalidate(changed: Obj) -> None:
        if revalidated is not None:
            revalidated.append(dict(changed))
    return Attributes(lookup("configmaps"), obj, None, Operation.CREATE, dry_run=dry_run,
                      revalidate=revalidate)


async def test_ex6_mutating_webhook_patch_is_applied_and_revalidated() -> None:
    caller = FakeCaller({"label.example.com": add_label("added", "yes")})
    plugin = await _plugins({"m": [_webhook("label.example.com")]}, caller, mutating=True)
    revalidated: list[Obj] = []
    attrs = _attrs(revalidated=revalidated)
    await plugin.admit(attrs)
    assert attrs.obj["metadata"]["labels"] == {"a": "1", "added": "yes"}
    assert len(revalidated) == 1
    request = caller.sent[0][1]["request"]
    assert request["operation"] == "CREATE" and request["namespace"] == "team"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["object"]["metadata"]["name"] == "cm" and request["oldObject"] is None
    assert request["dryRun"] is False


async def test_ex6_mutating_webhooks_run_in_configuration_name_order() -> None:
    caller = FakeCaller({"one.example.com": add_label("order", "one"),
                         "two.example.com": add_label("order", "two")})
    plugin = await _plugins({"b-second": [_webhook("two.example.com")],
                             "a-first": [_webhook("one.example.com")]}, caller, mutating=True)
    attrs = _attrs()
    await plugin.admit(attrs)
    assert [name for name, _ in caller.sent] == ["one.example.com", "two.example.com"]
    assert attrs.obj["metadata"]["labels"]["order"] == "two"


async def test_ex6_reinvocation_if_needed_calls_an_earlier_webhook_again() -> None:
    seen: list[Obj] = []

    def record(hook: Hook, review: Obj) -> Any:
        seen.append(review["request"]["object"]["metadata"]["labels"])
        return allow()(hook, review)
    caller = FakeCaller({"first.example.com": record,
                         "later.example.com": add_label("later", "x")})
    plugin = await _plugins({"a": [_webhook("first.example.com",
                                            reinvocationPolicy="IfNeeded")],
                             "b": [_webhook("later.example.com")]}, caller, mutating=True)
    await plugin.admit(_attrs())
    assert [name for name, _ in caller.sent] == [
        "first.example.com", "later.example.com", "first.example.com"]
    assert seen[1] == {"a": "1", "later": "x"}
    once = FakeCaller({"first.example.com": allow(),
                       "later.example.com": add_label("later", "x")})
    never = await _plugins({"a": [_webhook("first.example.com")],
                            "b": [_webhook("later.example.com")]}, once, mutating=True)
    await never.admit(_attrs())
    assert [name for name, _ in once.sent] == ["first.example.com", "later.example.com"]


async def test_ex6_refusal_reads_admission_webhook_denied_the_request() -> None:
    caller = FakeCaller({"no.example.com": deny("configmaps are not welcome")})
    plugin = await _plugins({"v": [_webhook("no.example.com")]}, caller, mutating=False)
    with pytest.raises(ApiError) as err:
        await plugin.validate(_attrs())
    assert err.value.message == ('admission webhook "no.example.com" denied the request: '
                                 "configmaps are not welcome")
    assert err.value.reason == Reason.FORBIDDEN


@pytest.mark.parametrize(("policy", "refused"), [("Fail", True), ("Ignore", False)])
async def test_ex6_failure_policy_decides_about_a_webhook_that_is_down(
        policy: str, refused: bool) -> None:
    caller = FakeCaller({})
    plugin = await _plugins({"v": [_webhook("down.example.com", failurePolicy=policy)]},
                            caller, mutating=False)
    if not refused:
        assert await plugin.validate(_attrs()) == []
        return
    with pytest.raises(ApiError) as err:
        await plugin.validate(_attrs())
    assert err.value.reason == Reason.INTERNAL_ERROR
    assert err.value.message == (
        'Internal error occurred: failed calling webhook "down.example.com": failed to call '
        'webhook: Post "https://127.0.0.1:1/x?timeout=10s": dial tcp 127.0.0.1:1: connect: '
        "connection refused")


async def test_ex6_response_with_another_uid_is_a_failed_call() -> None:
    def wrong(_hook: Hook, _review: Obj) -> Any:
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "other", "allowed": True}}
    plugin = await _plugins({"v": [_webhook("odd.example.com")]},
                            FakeCaller({"odd.example.com": wrong}), mutating=False)
    with pytest.raises(ApiError) as err:
        await plugin.validate(_attrs())
    assert 'received invalid webhook response: expected response.uid="' in err.value.message
    assert err.value.message.endswith('got "other"')


async def test_ex6_validating_webhook_may_not_patch() -> None:
    plugin = await _plugins({"v": [_webhook("p.example.com", failurePolicy="Fail")]},
                            FakeCaller({"p.example.com": add_label("x", "y")}),
                            mutating=False)
    with pytest.raises(ApiError) as err:
        await plugin.validate(_attrs())
    assert "validating webhook may not return response.patch" in err.value.message


async def test_ex6_dry_run_skips_no_webhook_without_side_effects() -> None:
    caller = FakeCaller({"calm.example.com": allow()})
    plugin = await _plugins({"v": [_webhook("calm.example.com", sideEffects="NoneOnDryRun")]},
                            caller, mutating=False)
    await plugin.validate(_attrs(dry_run=True))
    request = caller.sent[0][1]["request"]
    assert request["dryRun"] is True
    assert request["options"] == {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions",
                                  "dryRun": ["All"]}


async def test_ex6_dry_run_refused_by_a_webhook_with_side_effects() -> None:
    """A configuration stored before sideEffects was checked (v1beta1's Unknown): on a dry
    run the webhook is not called and the request is refused, as Kubernetes does."""
    caller = FakeCaller({"effects.example.com": allow()})
    plugin = await _plugins({"v": [_webhook("effects.example.com", sideEffects="Unknown",
                                            failurePolicy="Ignore")]}, caller, mutating=True)
    with pytest.raises(ApiError) as err:
        await plugin.admit(_attrs(dry_run=True))
    assert err.value.reason == Reason.BAD_REQUEST
    assert err.value.message == 'admission webhook "effects.example.com" does not support dry run'
    assert caller.sent == []


async def test_ex6_warnings_reach_the_response() -> None:
    plugin = await _plugins({"v": [_webhook("warn.example.com")]},
                            FakeCaller({"warn.example.com": allow(warnings=["careful"])}),
                            mutating=False)
    assert await plugin.validate(_attrs()) == ["careful"]


async def test_ex6_webhooks_not_matching_are_not_called() -> None:
    caller = FakeCaller({})
    plugin = await _plugins({"v": [_webhook(
        "elsewhere.example.com", namespaceSelector={"matchLabels": {"env": "dev"}})]},
        caller, mutating=False)
    assert await plugin.validate(_attrs()) == []
    assert caller.sent == []


@pytest.mark.parametrize(("expression", "called"), [
    pytest.param("object.metadata.name == 'cm'", True, id="true"),
    pytest.param("object.metadata.name == 'other'", False, id="false"),
    pytest.param("request.operation == 'CREATE' && request.namespace == 'team'", True,
                 id="request"),
    pytest.param("oldObject == null", True, id="no-old-object-on-create"),
])
async def test_ex6_match_conditions_decide_whether_a_webhook_is_called(
        expression: str, called: bool) -> None:
    caller = FakeCaller({"cond.example.com": allow()})
    plugin = await _plugins({"v": [_webhook("cond.example.com", matchConditions=[
        {"name": "only", "expression": expression}])]}, caller, mutating=False)
    await plugin.validate(_attrs())
    assert bool(caller.sent) is called


@pytest.mark.parametrize(("policy", "refused"), [("Fail", True), ("Ignore", False)])
async def test_ex6_match_condition_that_fails_to_evaluate_follows_failure_policy(
        policy: str, refused: bool) -> None:
    caller = FakeCaller({"cond.example.com": allow()})
    plugin = await _plugins({"v": [_webhook(
        "cond.example.com", failurePolicy=policy,
        matchConditions=[{"name": "missing", "expression": "object.spec.replicas > 1"}])]},
        caller, mutating=False)
    if refused:
        with pytest.raises(ApiError) as err:
            await plugin.validate(_attrs())
        assert err.value.reason == Reason.FORBIDDEN
        assert err.value.message.startswith(
            'configmaps "cm" is forbidden: expression \'object.spec.replicas > 1\' resulted '
            "in error: ")
    else:
        assert await plugin.validate(_attrs()) == []
    assert caller.sent == []


def test_ex6_match_condition_must_compile_to_a_bool() -> None:
    config: Obj = {"metadata": {"name": "v"}, "webhooks": [_webhook(
        "cond.example.com", matchConditions=[
            {"name": "syntax", "expression": "object.("},
            {"name": "string", "expression": "'not a bool'"}])]}
    errors = [str(e) for e in validate_configuration(config, None, mutating=False)]
    assert errors[0].startswith('webhooks[0].matchConditions[0].expression: Invalid value: '
                                '"object.(": compilation failed: ERROR: <input>:1:8:')
    assert errors[1] == ('webhooks[0].matchConditions[1].expression: Invalid value: '
                         "\"'not a bool'\": must evaluate to bool")


async def test_ex6_delete_reaches_webhooks_but_not_the_built_in_plugins() -> None:
    """Kubernetes' `Handles`: the built-in plugins know creates and updates; the webhook
    plugins are asked about deletes too (with the object being deleted as oldObject)."""
    class BuiltIn(Plugin):
        name = "BuiltIn"

        async def validate(self, attrs: Attributes) -> list[str]:
            raise AssertionError("a built-in plugin was asked about a delete")

    caller = FakeCaller({"no.example.com": deny("keep it")})
    webhook = await _plugins({"v": [_webhook("no.example.com", rules=[
        {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["configmaps"]}])]}, caller, mutating=False)
    old = _attrs().obj
    attrs = Attributes(lookup("configmaps"), {}, old, Operation.DELETE)
    with pytest.raises(ApiError) as err:
        await Chain([BuiltIn(), webhook]).validate(attrs)
    assert err.value.message == 'admission webhook "no.example.com" denied the request: keep it'
    request = caller.sent[0][1]["request"]
    assert request["operation"] == "DELETE" and request["name"] == "cm"
    assert request["object"] is None and request["oldObject"]["metadata"]["name"] == "cm"


async def test_ex6_registry_revalidates_what_a_webhook_changed_on_create_and_update() -> None:
    """Through the real registry: a patch that makes the object invalid is refused with the
    object's own validation message, on create and on update."""
    storage = MemoryStorage()
    cache = WatchCache(storage)
    registry = Registry(storage, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    info = lookup("mutatingwebhookconfigurations")
    await storage.create(storage_key(info, None, "m"), {
        "apiVersion": info.api_version, "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m"}, "webhooks": [_webhook("label.example.com")]})
    answers: dict[str, Answer] = {"label.example.com": add_label("seen", "yes")}
    registry.admission = Chain([MutatingWebhookAdmission(
        WebhookSource(Lookup(info.resource, storage, cache), mutating=True),
        namespaces=Lookup("namespaces", storage, cache), caller=FakeCaller(answers))])
    cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cm", "namespace": "default", "labels": {"a": "1"}},
               "data": {"k": "v"}}
    created = await registry.create("configmaps", "default", copy.deepcopy(cm))
    assert created.object["metadata"]["labels"] == {"a": "1", "seen": "yes"}
    answers["label.example.com"] = add_label("seen", "not a label value!")
    with pytest.raises(ApiError) as err:
        await registry.update("configmaps", "default", created.object, name="cm")
    assert err.value.reason == Reason.INVALID
    assert 'metadata.labels: Invalid value: "not a label value!"' in err.value.message
    with pytest.raises(ApiError) as err:
        await registry.create("configmaps", "default", {**cm, "metadata": {
            "name": "other", "namespace": "default"}})
    assert err.value.message == ('Internal error occurred: add operation does not apply: '
                                 'doc is missing path: "/metadata/labels/seen": missing value')


async def test_ex6_a_later_mutating_webhook_sees_the_labels_an_earlier_one_added() -> None:
    caller = FakeCaller({"tagger.example.com": add_label("tagged", "yes"),
                         "follower.example.com": add_label("followed", "yes")})
    plugin = await _plugins({
        "a": [_webhook("tagger.example.com")],
        "b": [_webhook("follower.example.com",
                       objectSelector={"matchLabels": {"tagged": "yes"}})]},
        caller, mutating=True)
    attrs = _attrs()
    await plugin.admit(attrs)
    assert attrs.obj["metadata"]["labels"] == {"a": "1", "tagged": "yes", "followed": "yes"}
